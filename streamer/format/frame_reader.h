// SPDX-License-Identifier: MIT
// FrameReader: pulls the stream header and frames off a ByteSource.
//
// It knows sizes and checksums, not meaning: each header is decoded and its
// checksum checked, payloads are read into caller buffers. It never seeks.
// Errors name the stream offset. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "streamer/format/frame_format.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

class FrameReader {
 public:
  explicit FrameReader(ByteSource* source) : source_(source) {}

  Status ReadStreamHeader(StreamHeader* header);
  // Reads the next frame header. Sets *end_of_input (and returns OK) when the
  // input ends exactly before a frame; ending inside a header is an error.
  Status ReadFrameHeader(FrameHeader* header, bool* end_of_input);
  // Reads the payload of the frame whose header was read last.
  Status ReadPayload(std::span<uint8_t> dst);
  // The same payload where the source holds it, when the source reads in
  // place (ByteSource::ReadInPlace); std::nullopt when it does not (nothing
  // was read: use ReadPayload).
  Result<std::optional<std::span<const uint8_t>>> ReadPayloadInPlace(size_t size);
  // No in-place payload byte before `in_place` will be read again.
  void DoneBefore(const uint8_t* in_place) { source_->DoneBefore(in_place); }
  // Reads and drops `size` bytes (a skippable frame's payload).
  Status SkipPayload(uint64_t size);
  // Checks that no byte follows; for after STREAM_END.
  Status ExpectEnd();

  uint64_t offset() const { return offset_; }              // next unread byte
  uint64_t frame_offset() const { return frame_offset_; }  // start of the last frame header

 private:
  ByteSource* source_;
  uint64_t offset_ = 0;
  uint64_t frame_offset_ = 0;
};

}  // namespace vramflow
