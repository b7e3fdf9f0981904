// SPDX-License-Identifier: MIT
// HostileStream: writes chunk streams frame by frame, with valid checksums,
// sequence numbers, digests and totals, but shapes no real writer makes
// (one-byte zero runs out of order, huge declared sizes, large metadata, a
// header chunk_size that lies). For the reader-hardening tests (issue 18).
// Frames go straight to a file, so streams of tens of MB cost the test
// process nothing. Not thread-safe.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/hash.h"
#include "streamer/format/frame_format.h"

namespace vramflow::testing {

class HostileStream {
 public:
  HostileStream(const std::string& path, StreamHeader header) : file_(std::fopen(path.c_str(), "wb")) {
    header.producer = header.producer.empty() ? "hostile-test" : header.producer;
    uint8_t bytes[kStreamHeaderSize];
    EncodeStreamHeader(header, bytes);
    Put(bytes, sizeof(bytes));
  }
  ~HostileStream() {
    if (file_) std::fclose(file_);
  }
  HostileStream(const HostileStream&) = delete;
  HostileStream& operator=(const HostileStream&) = delete;

  void Begin(uint32_t id, const ObjectMetadata& metadata, uint64_t size) {
    std::vector<uint8_t> payload = *EncodeObjectMetadata(metadata);
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kObjectBegin);
    h.object_id = id;
    h.raw_size = size;
    h.raw_hash = Hash64(payload.data(), payload.size());
    Frame(h, payload);
    ++totals_.object_count;
    sizes_[id] = size;
  }
  // A raw DATA frame holding `bytes` at `offset`.
  void Data(uint32_t id, uint64_t offset, const std::vector<uint8_t>& bytes) {
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kData);
    h.object_id = id;
    h.offset = offset;
    h.raw_size = bytes.size();
    h.raw_hash = Hash64(bytes.data(), bytes.size());
    digests_[id] += ObjectDigestTerm(offset, bytes.size(), h.raw_hash);
    Frame(h, bytes);
  }
  void Zero(uint32_t id, uint64_t offset, uint64_t size) {
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kZeroRun);
    h.object_id = id;
    h.offset = offset;
    h.raw_size = size;
    digests_[id] += ObjectDigestTerm(offset, size, 0);
    Frame(h, {});
  }
  // `size`: the final size of an object begun with kUnknownObjectSize.
  void End(uint32_t id, uint64_t size = kUnknownObjectSize) {
    if (size != kUnknownObjectSize) sizes_[id] = size;
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kObjectEnd);
    h.object_id = id;
    h.raw_size = sizes_[id];
    h.raw_hash = digests_[id];
    Frame(h, {});
    totals_.raw_bytes += sizes_[id];
  }
  // STREAM_END; the file is complete after this.
  void Finish() {
    totals_.frame_count = sequence_;
    totals_.stream_bytes = bytes_;
    uint8_t payload[kStreamEndPayloadSize];
    EncodeStreamTotals(totals_, payload);
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kStreamEnd);
    h.raw_hash = Hash64(payload, sizeof(payload));
    Frame(h, std::vector<uint8_t>(payload, payload + sizeof(payload)));
    std::fclose(file_);
    file_ = nullptr;
  }

 private:
  void Frame(FrameHeader h, const std::vector<uint8_t>& payload) {
    h.sequence = sequence_++;
    h.payload_size = static_cast<uint32_t>(payload.size());
    uint8_t bytes[kFrameHeaderSize];
    EncodeFrameHeader(h, bytes);
    Put(bytes, sizeof(bytes));
    Put(payload.data(), payload.size());
  }
  void Put(const uint8_t* data, size_t size) {
    if (size) std::fwrite(data, 1, size, file_);
    bytes_ += size;
  }

  std::FILE* file_;
  uint64_t sequence_ = 0;
  uint64_t bytes_ = 0;
  StreamTotals totals_;
  std::map<uint32_t, uint64_t> sizes_;
  std::map<uint32_t, uint64_t> digests_;
};

}  // namespace vramflow::testing
