// What `vramflow inspect` prints from a stream's seek index alone: the
// objects (names, sizes, attributes, chunk, zero-run and reference counts,
// stored bytes, the bytes of their frames) and how much of the stream was
// read to learn it. The frames themselves are not read, so there is no
// codec mix here; `inspect --full` reads every frame (inspect.h).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "streamer/seek_index.h"

namespace vramflow {

// The "stream:" line of both outputs: producer, format version, chunk size,
// and for a dedup stream its dedup window.
std::string DescribeStreamHeader(const StreamHeader& header);
// The stream header's dedup window for JSON: null without dedup.
nlohmann::ordered_json DedupWindowJson(const StreamHeader& header);

// `bytes_read`: what reading the index cost (StoredStreamIndex::bytes_read
// when nothing else was read).
void PrintIndexText(const StoredStreamIndex& stored, uint64_t bytes_read, std::ostream& out);
void PrintIndexJson(const StoredStreamIndex& stored, uint64_t bytes_read, std::ostream& out);

}  // namespace vramflow
