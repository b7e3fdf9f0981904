// SPDX-License-Identifier: MIT
// What `vramflow inspect` prints from a stream's seek index alone: the
// objects (names, sizes, attributes, chunk, zero-run and reference counts,
// stored bytes, the bytes of their frames) and how much of the stream was
// read to learn it. The frames themselves are not read, so there is no
// codec mix here; `inspect --full` reads every frame (inspect.h).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "streamer/format/base_stream.h"
#include "streamer/format/seek_index.h"

namespace vramflow {

// The "stream:" line of both outputs: producer, format version, chunk size,
// and for a dedup stream its dedup window.
std::string DescribeStreamHeader(const StreamHeader& header);
// The stream header's dedup window for JSON: null without dedup.
nlohmann::ordered_json DedupWindowJson(const StreamHeader& header);

// Stream text (names, attribute keys and values, the producer) for the
// reports. Any of it may be bytes that are not UTF-8, or control bytes.
//   ShownText: for the text report: escaped (common/printable.h) and cut to
//              `width` bytes, "..." included (0: not cut).
//   PutJsonText: sets j[key] to the text when it is valid UTF-8 (JSON
//              escapes control bytes itself); otherwise to its escaped form
//              and j[key + "_hex"] to its bytes in hex, so nothing is lost.
//   AttributesJson: the attributes as an object, through PutJsonText.
std::string ShownText(const std::string& text, size_t width = 0);
void PutJsonText(nlohmann::ordered_json& j, const std::string& key, const std::string& text);
nlohmann::ordered_json AttributesJson(const std::vector<std::pair<std::string, std::string>>& attributes);

// `bytes_read`: what reading the index cost (StoredStreamIndex::bytes_read
// when nothing else was read).
// What names a stored stream: its id (FORMAT.md 4.12) and, for an
// incremental stream, its BASE frame.
struct StreamIdentity {
  StreamId id{};
  std::optional<BaseDescriptor> base;
};
void PrintIndexText(const StoredStreamIndex& stored, const StreamIdentity& identity, uint64_t bytes_read,
                    std::ostream& out);
void PrintIndexJson(const StoredStreamIndex& stored, const StreamIdentity& identity, uint64_t bytes_read,
                    std::ostream& out);

}  // namespace vramflow
