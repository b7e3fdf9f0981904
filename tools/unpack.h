// `vramflow unpack`: one chunk stream in, files out.
//
// Output placement: with `-o -` the stream's single object goes to stdout;
// when OUT ends in '/' or is an existing directory, every object becomes a
// file under it (names checked by safe_path.h); otherwise a one-object stream
// becomes the file OUT and a stream of several objects the new directory OUT.
// Files are filled by the restore graph (streamer/pipeline.h) through a file
// device, in a private staging directory beside OUT, and moved into place
// only after STREAM_END has been verified and every byte written, so a failed
// or interrupted unpack leaves nothing that looks complete. Existing files
// are never replaced without `force`. `-o -` reads serially and writes as it
// goes: a failure there leaves partial output on stdout, with exit status 1.
// A network sender learns the outcome: its Commit() succeeds only once every
// file is in place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/pipeline.h"
#include "transport/open_uri.h"

namespace vramflow {

struct UnpackOptions {
  std::string input;   // any source URI: path, -, fd:N; tcp:// and unix: are listened on
  std::string output;  // directory, file or "-"
  bool force = false;
  PipelineOptions pipeline;  // threads and memory budget of the restore graph
  TransportOptions transport;
  bool progress = false;  // a progress bar on stderr
};

struct UnpackReport {
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;
  std::vector<std::string> written;  // final paths
  double seconds = 0;
};

Status RunUnpack(const UnpackOptions& options, UnpackReport* report);

}  // namespace vramflow
