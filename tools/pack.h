// `vramflow pack`: files (or stdin) in, one chunk stream out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/status.h"

namespace vramflow {

struct PackOptions {
  std::vector<std::string> inputs;  // paths, or "-" for stdin
  std::string output;               // path, or "-" for stdout
  std::string stdin_name = "stdin";  // object name for "-"
  EncoderOptions encoder;
  uint32_t chunk_size = 1u << 20;
  bool force = false;  // overwrite an existing output file
};

struct PackReport {
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;
  uint64_t stream_bytes = 0;
  uint64_t legacy_images = 0;
  double seconds = 0;
};

Status RunPack(const PackOptions& options, PackReport* report);

}  // namespace vramflow
