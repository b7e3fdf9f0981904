// SPDX-License-Identifier: MIT
// Test helper: writes stored streams (with index blocks) whose chunks are
// planned one by one: DATA, ZERO_RUN, DEDUP_REF, or, on a base, BASE_REF and
// BASE_DELTA. Used to build bases and incremental streams on them without
// the dump side.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "transport/core/file_random_access.h"
#include "transport/core/memory_stream.h"

namespace vramflow::testing {

enum class Plan { kData, kZero, kDedup, kRef, kDelta };

struct PlannedChunk {
  Plan plan = Plan::kData;
  // kDedup: the DATA chunk of this stream (object id, offset); kRef, kDelta:
  // the chunk of the base.
  uint32_t object = 0;
  uint64_t offset = 0;
};

struct PlannedObject {
  ObjectMetadata metadata;
  std::vector<uint8_t> bytes;
  std::vector<PlannedChunk> chunks;  // chunk i covers [i * chunk_size, ...); missing entries are DATA
};

// The bytes of a stream's objects, for the chunks a reference names: objects
// are numbered 1, 2, ... in the order given.
inline std::vector<uint8_t> ChunkOf(const std::vector<PlannedObject>& objects, uint32_t object, uint64_t offset,
                                    uint64_t size) {
  const std::vector<uint8_t>& b = objects.at(object - 1).bytes;
  return std::vector<uint8_t>(b.begin() + offset, b.begin() + offset + size);
}

// Writes `objects` as an indexed stream. With `base` (and `base_objects`, the
// base's own objects' bytes) the stream is incremental on it.
inline std::vector<uint8_t> BuildStream(const std::vector<PlannedObject>& objects, uint32_t chunk_size,
                                        const BaseDescriptor* base = nullptr,
                                        const std::vector<PlannedObject>* base_objects = nullptr,
                                        uint32_t dedup_window = 1024) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = chunk_size;
  header.flags = kStreamFlagSeekIndex | kStreamFlagIndexBlocks | kStreamFlagDedup;
  header.dedup_window = dedup_window;
  if (base) header.flags |= kStreamFlagBase;
  StreamWriter writer(&sink, header);
  if (base) writer.SetBase(*base);
  auto check = [](const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  };
  check(writer.Start());
  ChunkEncoder encoder(EncoderOptions{});
  for (const PlannedObject& o : objects) {
    Result<uint32_t> id = writer.BeginObject(o.metadata, o.bytes.size());
    check(id.status());
    for (uint64_t offset = 0, i = 0; offset < o.bytes.size(); offset += chunk_size, ++i) {
      const uint64_t n = std::min<uint64_t>(chunk_size, o.bytes.size() - offset);
      std::span<const uint8_t> raw(o.bytes.data() + offset, n);
      const PlannedChunk c = i < o.chunks.size() ? o.chunks[i] : PlannedChunk{};
      EncodedChunk encoded;
      switch (c.plan) {
        case Plan::kData:
        case Plan::kZero:
          check(encoder.Encode(raw, &encoded));
          check(writer.AddChunk(*id, offset, n, encoded));
          break;
        case Plan::kDedup:
          check(writer.AddDedupRef(*id, offset, n, Hash64(raw.data(), n),
                                   DedupRef{c.object, c.offset, HashContent128(raw.data(), n)}));
          break;
        case Plan::kRef:
        case Plan::kDelta: {
          std::vector<uint8_t> from = ChunkOf(*base_objects, c.object, c.offset, n);
          BaseChunkRef ref{c.object, c.offset, Sha256(from)};
          if (c.plan == Plan::kRef) {
            check(writer.AddBaseRef(*id, offset, n, Hash64(raw.data(), n), ref));
          } else {
            std::vector<uint8_t> delta(n);
            for (size_t k = 0; k < n; ++k) delta[k] = raw[k] ^ from[k];
            ChunkEncoder delta_encoder(EncoderOptions{.detect_zero_runs = false});
            check(delta_encoder.Encode(delta, &encoded));
            check(writer.AddBaseDelta(*id, offset, n, Hash64(raw.data(), n), ref, encoded));
          }
          break;
        }
      }
    }
    check(writer.EndObject(*id));
  }
  check(writer.Finish());
  return sink.bytes();
}

inline BaseOpenOptions FileBaseOptions(std::vector<std::string> more = {}) {
  BaseOpenOptions options;
  options.open = [](const std::string& location) -> Result<std::shared_ptr<RandomAccessSource>> {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> file, OpenFileRandomAccess(location));
    return std::shared_ptr<RandomAccessSource>(std::move(file));
  };
  options.more_locations = std::move(more);
  return options;
}

// The descriptor a stream built on the stream in file `path` carries,
// recording `location` (a hint, resolved against the dependent's directory).
inline BaseDescriptor DescriptorOf(const std::string& path, const std::string& location) {
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(path, FileBaseOptions());
  if (!base.ok()) throw std::runtime_error(base.status().ToString());
  BaseDescriptor d = (*base)->DescriptorForDependent();
  d.location = location;
  return d;
}

}  // namespace vramflow::testing
