// SPDX-License-Identifier: MIT
// The file list of a `vramflow streamer` stream (docs/CLI.md, "streamer"):
// an object that `streamer capture` writes as soon as CRIU closes its
// connection, naming every image file of the dump (each name followed by a
// NUL byte), so that `serve` can answer "absent" for any other name before
// the stream ends. Serve and extract never hand it over as an image file.
#pragma once

#include <cstdint>

namespace vramflow {

inline constexpr char kStreamerFileListObject[] = ".vramflow-streamer-files";
// Its metadata attribute: kStreamerAttribute = kStreamerFileListValue.
inline constexpr char kStreamerAttribute[] = "vramflow-streamer";
inline constexpr char kStreamerFileListValue[] = "file-list";
// The largest file list a reader accepts.
inline constexpr uint64_t kMaxStreamerFileList = 16ull << 20;

}  // namespace vramflow
