// SPDX-License-Identifier: MIT
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
//
// With a selection (`--object NAME`, `--gpu N`: object_selection.h) only the
// selected objects become files. A stored stream with a seek index (a file,
// an s3:// object) is then read through it: only the selected objects'
// frames are fetched, in parallel ranges, as a sub-stream that the restore
// graph checks as fully as a whole stream (streamer/format/sub_stream.h). Any other
// stream is read whole (`note` says so): every object is restored into the
// staging area, so that references into unselected objects resolve, and
// only the selected ones are moved into place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/progress.h"
#include "common/status.h"
#include "streamer/pipeline.h"
#include "tools/object_selection.h"
#include "tools/stream_figures.h"
#include "transport/open_uri.h"

namespace vramflow {

struct UnpackOptions {
  std::string input;   // any source URI: path, -, fd:N; tcp:// and unix: are listened on
  std::string output;  // directory, file or "-"
  bool force = false;
  // The objects may declare at most this many bytes in all (0: no limit);
  // they must also fit in the free space where files are written
  // (output_limit.h).
  uint64_t max_output = 0;
  // fsync every file written and every directory an entry was added to
  // before reporting success (and, for a network input, before the sender
  // is told DONE). Files only: nothing is synced for -o -, a device or a FIFO.
  bool fsync = false;
  PipelineOptions pipeline;  // threads and memory budget of the restore graph
  TransportOptions transport;
  ProgressStyle progress;  // on stderr
  ObjectSelector select;   // empty: every object
  // With a network input: earlier streams the sender may build its stream on
  // (base_store.h; docs/NETWORK.md, "Bases"), offered to it and resolved
  // from here. Empty: none.
  std::string base_store;
  // The base of an incremental stream and links of its chain (--base,
  // streamer/base/base_opener.h); empty: the location its BASE frame records.
  std::vector<std::string> bases;
  // Told (once, before reading) when a selection has to read the whole stream.
  std::function<void(const std::string&)> note;
};

// The objects written, their raw bytes and the seconds (StreamFigures), and:
struct UnpackReport : StreamFigures {
  std::vector<std::string> written;  // final paths
  // A selection read through a seek index: what the stored stream is
  // (stream_bytes) and what was fetched of it (the index included).
  bool through_index = false;
  uint64_t bytes_read = 0;
  uint64_t index_bytes = 0;
  uint64_t stream_objects = 0;
  uint64_t ranges = 0;      // ranges fetched (adjacent frames merged)
  uint64_t moved_refs = 0;  // references into unselected objects, fetched as the DATA frames they name
};

Status RunUnpack(const UnpackOptions& options, UnpackReport* report);

}  // namespace vramflow
