// SPDX-License-Identifier: MIT
// StreamerOptions: what the criu-image-streamer drop-in (`vramflow streamer`) is asked to do:
// capture, serve or extract, with criu-image-streamer's options and vramflow's own. The command
// line (tools/streamer_command.h) fills it; capture.h and serve.h run it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/cleanup_registry.h"
#include "common/progress.h"
#include "streamer/pipeline.h"
#include "transport/open_uri.h"

namespace vramflow {

// What `vramflow streamer` was asked to do, resolved from its flags.
struct StreamerOptions {
  enum class Mode { kCapture, kServe, kExtract };
  Mode mode = Mode::kCapture;
  std::string images_dir;  // created if missing; the socket (and extract's files) go here

  // -s: the stream's fd (one: several would stripe the stream, which is
  // refused). Left empty, the stream is stdout (capture) or stdin.
  std::vector<int> shard_fds;
  // -e NAME:FD: capture reads each fd to its end and stores it as object
  // NAME; serve and extract write object NAME into the fd instead of
  // handing it to CRIU or writing it to the images directory.
  std::vector<std::pair<std::string, int>> ext_files;
  int progress_fd = 2;  // -p: the progress lines
  // --tcp-listen-remap OLD:NEW (serve): listening TCP sockets of files.img
  // on port OLD listen on NEW after the restore.
  std::vector<std::pair<uint16_t, uint16_t>> tcp_listen_remap;

  // Capture: where the stream goes (any sink URI; empty: the shard fd).
  // Serve and extract: where it comes from (any source URI, or a listen URI
  // when `listen`; empty: the shard fd).
  std::string stream_uri;
  bool listen = false;
  bool force = false;  // capture: overwrite an existing output file or S3 object
  // Serve: where files that arrived and that CRIU has not asked for yet go
  // once they outgrow the memory budget (empty: a private directory under
  // $TMPDIR or /tmp).
  std::string spill_dir;
  // Serve: how long to wait for CRIU to connect (negative: forever).
  double criu_timeout_s = -1;
  // --base (repeatable): capture codes each file against the file of the
  // same name in the first (an incremental stream); serve and extract read
  // the base there instead of where the stream's BASE frame says. More
  // locations are links of the base's chain (streamer/base/base_opener.h).
  std::vector<std::string> base;
  // --base-store DIR (serve, extract with --listen): the streams offered to
  // the sender as bases (streamer/base/base_store.h); from a sender, bases come only
  // from these, or from --base.
  std::string base_store;

  PipelineOptions pipeline;    // capture: codec, chunk size, threads; all: max_memory
  TransportOptions transport;  // keys, TLS, S3
  ProgressStyle progress;      // vramflow's own --progress, on stderr (off by default)
  // Temporary files and partial outputs to remove when a signal stops the
  // command (tools/cli/interrupt.h).
  CleanupRegistry* cleanup = nullptr;
};

}  // namespace vramflow
