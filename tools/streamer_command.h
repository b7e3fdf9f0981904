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

#include "common/status.h"
#include "image_streamer/options.h"
#include "tools/cli/command_flags.h"
#include "tools/cli/transport_flags.h"
#include "tools/command.h"

namespace vramflow {

// The command (tools/command.h), added as "streamer" with its subcommands
// capture, serve and extract.
class StreamerCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  // Was `vramflow streamer ...` the command given?
  bool chosen() const override;
  // "streamer capture", ... for messages.
  std::string name() const override;
  // A bad command line (exit status 2).
  Status Resolve() override;
  // Loads keys and certificates (a failure of the job, exit status 1), then
  // runs the subcommand given (RunStreamer).
  Status Run(const CommandContext& context) override;

 private:
  StreamerOptions options_;
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
