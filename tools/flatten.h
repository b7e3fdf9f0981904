// SPDX-License-Identifier: MIT
// `vramflow flatten`: turns an incremental stream into a self-contained one
// (no base flag) holding every byte itself, each resolved through the base
// chain and checked as a restore checks it (SHA-256 of the base's bytes,
// XXH3 of the result). The input is read in order and written through a
// StreamWriter as it goes, so memory stays bounded by a few chunks and the
// reader's records (a base on S3 has its chunks read several at once:
// streamer/decode_ahead.h); DATA, ZERO_RUN and DEDUP_REF frames keep their payloads,
// BASE_REF and BASE_DELTA chunks are encoded anew. Every chunk's SHA-256
// goes into the output's DIGEST_BLOCKs, so that it can be a base matched by
// digests alone. A file output appears only once complete (a temporary file
// renamed into place).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/stream_figures.h"
#include "transport/open_uri.h"

namespace vramflow {

struct FlattenOptions {
  std::string input;
  std::string output;              // a file, s3://, or - (stdout)
  std::vector<std::string> bases;  // --base (streamer/base/base_opener.h)
  uint64_t max_memory = 256ull << 20;
  bool force = false;  // replace an existing output file
  TransportOptions transport;
};

// The objects, their raw bytes and the bytes written (StreamFigures), and:
struct FlattenReport : StreamFigures {
  uint64_t resolved_bytes = 0;  // raw bytes that came from the base
};

Status RunFlatten(const FlattenOptions& options, FlattenReport* report);

}  // namespace vramflow
