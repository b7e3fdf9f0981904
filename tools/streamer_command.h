// SPDX-License-Identifier: MIT
// `vramflow streamer`: a drop-in for criu-image-streamer (CRIU's --stream),
// whose one stream is a vramflow chunk stream.
//
// Same options and subcommands as criu-image-streamer (-D/--images-dir,
// -s/--shard-fds, -e/--ext-file-fds, -p/--progress-fd, --tcp-listen-remap;
// capture, serve, extract), same socket names and progress lines, so a
// runtime that runs criu-image-streamer runs this unchanged (also when the
// binary is called as `criu-image-streamer`). Options of vramflow's own
// pick where the stream goes or comes from (-o/--to, -i/--from, --listen),
// its codec, keys, threads and memory budget. Unlike criu-image-streamer, a
// runtime error exits non-zero. See docs/CLI.md, "streamer".
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "streamer/pipeline.h"
#include "tools/command_flags.h"
#include "tools/progress.h"
#include "tools/transport_flags.h"
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
  // locations are links of the base's chain (tools/base_opener.h).
  std::vector<std::string> base;
  // --base-store DIR (serve, extract with --listen): the streams offered to
  // the sender as bases (tools/base_store.h); from a sender, bases come only
  // from these, or from --base.
  std::string base_store;

  PipelineOptions pipeline;    // capture: codec, chunk size, threads; all: max_memory
  TransportOptions transport;  // keys, TLS, S3
  ProgressStyle progress;      // vramflow's own --progress, on stderr (off by default)
  // Temporary files and partial outputs to remove when a signal stops the
  // command (tools/interrupt.h).
  CleanupRegistry* cleanup = nullptr;
};

// The subcommand's flags, added to `app` as "streamer"; Resolve() after
// parsing gives the options.
class StreamerCommand {
 public:
  void Add(CLI::App* app);
  // Was `vramflow streamer ...` the command given?
  bool chosen() const;
  // "streamer capture", ... for messages.
  std::string name() const;
  // A bad command line (exit status 2).
  Status Resolve(StreamerOptions* options) const;
  // Keys and certificates (a failure of the job, exit status 1).
  Status LoadCredentials(StreamerOptions* options) const;

 private:
  CLI::App* streamer_ = nullptr;
  CLI::App* capture_ = nullptr;
  CLI::App* serve_ = nullptr;
  CLI::App* extract_ = nullptr;
  std::string images_dir_;
  std::string shard_fds_;
  std::string ext_file_fds_;
  int progress_fd_ = 2;
  std::string tcp_listen_remap_;
  std::string to_;
  std::string from_;
  std::string listen_;
  std::string spill_dir_;
  double criu_timeout_s_ = -1;
  std::vector<std::string> base_;
  std::string base_store_;
  bool base_refs_only_ = false;
  bool digests_ = false;
  bool force_ = false;
  std::string progress_ = "none";
  DumpFlags dump_;
  TransportFlags net_;
};

// Runs the command; returns once the stream is complete and committed
// (capture), CRIU has closed its connection and every file it took has been
// handed over (serve), or every file is in place (extract).
Status RunStreamer(const StreamerOptions& options);

// Parsers of the criu-image-streamer option values, for tests.
Result<std::vector<int>> ParseShardFds(const std::string& text);
Result<std::vector<std::pair<std::string, int>>> ParseExtFileFds(const std::string& text);
Result<std::vector<std::pair<uint16_t, uint16_t>>> ParsePortRemap(const std::string& text);

}  // namespace vramflow
