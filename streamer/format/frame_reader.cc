// SPDX-License-Identifier: MIT
#include "streamer/format/frame_reader.h"

#include <algorithm>
#include <vector>

namespace vramflow {
namespace {

Status TruncatedPayload(uint64_t offset, size_t got, size_t size) {
  return Status::Truncated("stream truncated inside a payload at offset " + std::to_string(offset) + " (got " +
                           std::to_string(got) + " of " + std::to_string(size) + " bytes)");
}

}  // namespace

Status FrameReader::ReadStreamHeader(StreamHeader* header) {
  uint8_t buf[kStreamHeaderSize];
  VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*source_, buf));
  offset_ += n;
  if (n == 0) return Status::Truncated("input is empty: the stream is truncated before its header");
  if (n < kStreamHeaderSize) {
    size_t magic_bytes = std::min(n, kStreamMagic.size());
    if (!std::equal(buf, buf + magic_bytes, kStreamMagic.begin()))
      return Status::Corruption("stream header at offset 0: bad magic: not a vramflow chunk stream");
    return Status::Truncated("stream header truncated: input ends at offset " + std::to_string(n) +
                             " (a stream header is 64 bytes)");
  }
  Status s = DecodeStreamHeader(buf, header);
  if (!s.ok()) return s.WithContext("stream header at offset 0");
  return Status::Ok();
}

Status FrameReader::ReadFrameHeader(FrameHeader* header, bool* end_of_input) {
  *end_of_input = false;
  frame_offset_ = offset_;
  uint8_t buf[kFrameHeaderSize];
  VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*source_, buf));
  offset_ += n;
  if (n == 0) {
    *end_of_input = true;
    return Status::Ok();
  }
  if (n < kFrameHeaderSize)
    return Status::Truncated("stream truncated inside a frame header at offset " + std::to_string(frame_offset_) +
                             " (got " + std::to_string(n) + " of 64 bytes)");
  return DecodeFrameHeader(buf, header);
}

Status FrameReader::ReadPayload(std::span<uint8_t> dst) {
  VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*source_, dst));
  offset_ += n;
  if (n < dst.size()) return TruncatedPayload(offset_, n, dst.size());
  return Status::Ok();
}

Result<std::optional<std::span<const uint8_t>>> FrameReader::ReadPayloadInPlace(size_t size) {
  std::optional<std::span<const uint8_t>> payload = source_->ReadInPlace(size);
  if (!payload) return payload;
  offset_ += payload->size();
  if (payload->size() < size) return TruncatedPayload(offset_, payload->size(), size);
  return payload;
}

Status FrameReader::SkipPayload(uint64_t size) {
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, 1 << 16)));
  while (size > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
    VF_RETURN_IF_ERROR(ReadPayload(std::span<uint8_t>(buf.data(), want)));
    size -= want;
  }
  return Status::Ok();
}

Status FrameReader::ExpectEnd() {
  uint8_t probe[4096];
  VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*source_, probe));
  if (n == 0) return Status::Ok();
  uint64_t extra = n;
  for (;;) {  // count the rest, for the message
    VF_ASSIGN_OR_RETURN(size_t more, ReadFully(*source_, probe));
    if (more == 0) break;
    extra += more;
  }
  return Status::Corruption(std::to_string(extra) + " unexpected bytes after STREAM_END at offset " +
                            std::to_string(offset_));
}

}  // namespace vramflow
