// SPDX-License-Identifier: MIT
#include "tools/streamer_command.h"

#include <cerrno>
#include <cstdlib>

#include "image_streamer/capture.h"
#include "image_streamer/serve.h"
#include "streamer/base/base_opener.h"
#include "tools/cli/cli_uri.h"
#include "tools/cli/cli_util.h"

namespace vramflow {
namespace {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

Result<uint64_t> ParseUnsigned(const std::string& text, uint64_t max, const std::string& what) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
    return Status::InvalidArgument(what + " '" + text + "' is not a number");
  const uint64_t n = std::strtoull(text.c_str(), nullptr, 10);
  if (n > max) return Status::InvalidArgument(what + " " + text + " is more than " + std::to_string(max));
  return n;
}

}  // namespace

Result<std::vector<int>> ParseShardFds(const std::string& text) {
  std::vector<int> fds;
  for (const std::string& part : SplitCommas(text)) {
    VF_ASSIGN_OR_RETURN(uint64_t fd, ParseUnsigned(part, 1u << 30, "--shard-fds: fd"));
    fds.push_back(static_cast<int>(fd));
  }
  return fds;
}

Result<std::vector<std::pair<std::string, int>>> ParseExtFileFds(const std::string& text) {
  std::vector<std::pair<std::string, int>> files;
  for (const std::string& part : SplitCommas(text)) {
    const size_t colon = part.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return Status::InvalidArgument("--ext-file-fds: '" + part + "' is not NAME:FD");
    VF_ASSIGN_OR_RETURN(uint64_t fd, ParseUnsigned(part.substr(colon + 1), 1u << 30, "--ext-file-fds: fd"));
    const std::string name = part.substr(0, colon);
    if (name.find('/') != std::string::npos || name == "." || name == "..")
      return Status::InvalidArgument("--ext-file-fds: '" + name + "' is not a plain file name");
    for (const auto& [other, ignored] : files)
      if (other == name) return Status::InvalidArgument("--ext-file-fds: '" + name + "' given twice");
    files.emplace_back(name, static_cast<int>(fd));
  }
  return files;
}

Result<std::vector<std::pair<uint16_t, uint16_t>>> ParsePortRemap(const std::string& text) {
  std::vector<std::pair<uint16_t, uint16_t>> remap;
  for (const std::string& part : SplitCommas(text)) {
    const size_t colon = part.find(':');
    if (colon == std::string::npos) return Status::InvalidArgument("--tcp-listen-remap: '" + part + "' is not OLD:NEW");
    VF_ASSIGN_OR_RETURN(uint64_t from, ParseUnsigned(part.substr(0, colon), 65535, "--tcp-listen-remap: port"));
    VF_ASSIGN_OR_RETURN(uint64_t to, ParseUnsigned(part.substr(colon + 1), 65535, "--tcp-listen-remap: port"));
    remap.emplace_back(static_cast<uint16_t>(from), static_cast<uint16_t>(to));
  }
  return remap;
}

void StreamerCommand::Add(CLI::App* parent) {
  streamer_ = parent->add_subcommand(
      "streamer",
      "A drop-in for criu-image-streamer (criu dump/restore --stream): the whole checkpoint as one vramflow stream. "
      "Also runs as `criu-image-streamer` (a link to vramflow of that name)");
  streamer_->require_subcommand(1);
  streamer_->set_version_flag("-V,--version", ProducerString());
  streamer_
      ->add_option("-D,--images-dir", images_dir_,
                   "CRIU's images directory: the socket goes here (created if "
                   "missing); extract writes the image files here")
      ->required();
  streamer_->add_option("-s,--shard-fds", shard_fds_,
                        "the stream's fd (default: stdout for capture, stdin for serve and extract); one fd: several "
                        "would stripe the stream, which vramflow refuses");
  streamer_->add_option("-e,--ext-file-fds", ext_file_fds_,
                        "NAME:FD,...: capture stores what FD gives until its end as file NAME; serve and extract "
                        "write file NAME into FD");
  streamer_
      ->add_option("-p,--progress-fd", progress_fd_,
                   "fd for the progress lines (socket-init, checkpoint-start, the JSON stats line)")
      ->capture_default_str();
  streamer_->add_option("--tcp-listen-remap", tcp_listen_remap_,
                        "OLD:NEW,... (serve): TCP sockets that listened on port OLD listen on NEW after the restore");
  streamer_->add_option("-o,--to", to_,
                        "capture: where the stream goes (a file, -, fd:N, tcp://HOST:PORT, unix:PATH, "
                        "s3://BUCKET/KEY); default: the shard fd");
  CLI::Option* from = streamer_->add_option(
      "-i,--from", from_,
      "serve, extract: the stream to read (a file, -, fd:N, s3://BUCKET/KEY); default: the shard fd");
  streamer_->add_option("--listen", listen_, "serve, extract: receive the stream on tcp://HOST:PORT or unix:PATH")
      ->excludes(from);
  streamer_->add_option("--spill-dir", spill_dir_,
                        "serve: where files CRIU has not asked for yet go beyond --max-memory (default: a private "
                        "directory in $TMPDIR or /tmp)");
  streamer_->add_option("--criu-timeout", criu_timeout_s_,
                        "seconds to wait for CRIU to connect (default: forever, as criu-image-streamer)");
  streamer_
      ->add_option("--base", base_,
                   "capture: an earlier stream (a file or s3://BUCKET/KEY with a seek index) to code this one "
                   "against, each image file against the file of the same name there (an incremental "
                   "checkpoint); serve, extract: where that base is (default: where the stream's BASE frame "
                   "says). Again for more links of the base's own chain")
      ->allow_extra_args(false);  // one stream per --base
  streamer_->add_option("--base-store", base_store_,
                        "serve, extract with --listen: earlier streams the sender may build its stream on, offered "
                        "to it");
  streamer_->add_flag("--base-refs-only", base_refs_only_,
                      "capture with --base: match chunks by the base's stored digests, reading only the base chunks "
                      "that become references, to prove them (no deltas)");
  streamer_->add_flag("--digests", digests_,
                      "capture: write each chunk's SHA-256 (DIGEST_BLOCKs), so that the stream can be a "
                      "--base-refs-only base; always on with --base");
  streamer_->add_flag("-f,--force", force_, "capture: overwrite an existing output file or S3 object");
  streamer_->add_option("--progress", progress_, "vramflow's own progress on stderr: none, lines, bar or auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  dump_.Add(streamer_);
  net_.Add(streamer_, /*sending=*/true, /*receiving=*/true);
  capture_ = streamer_->add_subcommand("capture", "CRIU dump -> the stream");
  serve_ = streamer_->add_subcommand("serve", "the stream -> CRIU restore");
  extract_ = streamer_->add_subcommand("extract", "the stream -> image files in the images directory");
  for (CLI::App* sub : {capture_, serve_, extract_}) sub->fallthrough();
}

bool StreamerCommand::chosen() const { return streamer_ && streamer_->parsed(); }

std::string StreamerCommand::name() const {
  if (capture_ && capture_->parsed()) return "streamer capture";
  if (serve_ && serve_->parsed()) return "streamer serve";
  if (extract_ && extract_->parsed()) return "streamer extract";
  return "streamer";
}

Status StreamerCommand::Resolve() {
  StreamerOptions* options = &options_;
  options->mode = capture_->parsed() ? StreamerOptions::Mode::kCapture
                  : serve_->parsed() ? StreamerOptions::Mode::kServe
                                     : StreamerOptions::Mode::kExtract;
  const bool capture = options->mode == StreamerOptions::Mode::kCapture;
  options->images_dir = images_dir_;
  if (!shard_fds_.empty()) {
    VF_ASSIGN_OR_RETURN(options->shard_fds, ParseShardFds(shard_fds_));
    if (options->shard_fds.size() > 1)
      return Status::InvalidArgument("--shard-fds " + shard_fds_ + ": vramflow writes one stream to one fd (" +
                                     std::to_string(options->shard_fds.size()) +
                                     " given); its threads already compress in parallel: give one fd");
  }
  if (!ext_file_fds_.empty()) {
    VF_ASSIGN_OR_RETURN(options->ext_files, ParseExtFileFds(ext_file_fds_));
  }
  if (progress_fd_ < 0) return Status::InvalidArgument("--progress-fd must be an fd");
  options->progress_fd = progress_fd_;
  if (!tcp_listen_remap_.empty()) {
    if (options->mode != StreamerOptions::Mode::kServe)
      return Status::InvalidArgument("--tcp-listen-remap applies to serve only");
    VF_ASSIGN_OR_RETURN(options->tcp_listen_remap, ParsePortRemap(tcp_listen_remap_));
  }
  if (capture) {
    if (!from_.empty() || !listen_.empty())
      return Status::InvalidArgument("capture writes a stream: give -o/--to, not -i/--from or --listen");
    if (!to_.empty() && !options->shard_fds.empty())
      return Status::InvalidArgument("give -o/--to or --shard-fds, not both");
    if (!to_.empty()) VF_RETURN_IF_ERROR(CheckWriteUri(to_));
    options->stream_uri = to_;
  } else {
    if (!to_.empty())
      return Status::InvalidArgument("serve and extract read a stream: give -i/--from or --listen, not -o/--to");
    if ((!from_.empty() || !listen_.empty()) && !options->shard_fds.empty())
      return Status::InvalidArgument("give -i/--from, --listen or --shard-fds, not two of them");
    if (!listen_.empty()) {
      VF_RETURN_IF_ERROR(CheckListenUri(listen_));
      options->stream_uri = listen_;
      options->listen = true;
    } else if (!from_.empty()) {
      VF_RETURN_IF_ERROR(CheckReadUri(
          from_, "vramflow streamer " + std::string(serve_->parsed() ? "serve" : "extract") + " --listen"));
      options->stream_uri = from_;
    }
  }
  if (!spill_dir_.empty() && options->mode != StreamerOptions::Mode::kServe)
    return Status::InvalidArgument("--spill-dir applies to serve only");
  options->spill_dir = spill_dir_;
  options->criu_timeout_s = criu_timeout_s_;
  if (base_refs_only_ && (!capture || base_.empty()))
    return Status::InvalidArgument("--base-refs-only applies to capture with --base");
  if (digests_ && !capture) return Status::InvalidArgument("--digests applies to capture");
  for (const std::string& base : base_) VF_RETURN_IF_ERROR(CheckBaseLocation(base));
  options->base = base_;
  if (!base_store_.empty() && !options->listen)
    return Status::InvalidArgument("--base-store offers bases to a sender: serve and extract with --listen only");
  options->base_store = base_store_;
  options->force = force_;
  options->progress =
      ProgressStyle(ParseProgressMode(progress_).value_or(ProgressStyle::Mode::kNone), std::chrono::milliseconds(5000));
  VF_RETURN_IF_ERROR(dump_.Resolve(&options->pipeline));
  options->pipeline.base_refs_only = base_refs_only_;
  options->pipeline.chunk_digests = digests_;
  VF_RETURN_IF_ERROR(net_.Resolve(&options->transport));
  return Status::Ok();
}

Status StreamerCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  options_.cleanup = context.cleanup;
  if (!options_.stream_uri.empty() || !options_.base.empty())
    VF_RETURN_IF_ERROR(net_.LoadCredentials(&options_.transport));
  return RunStreamer(options_);
}

Status RunStreamer(const StreamerOptions& options) {
  switch (options.mode) {
    case StreamerOptions::Mode::kCapture:
      return RunStreamerCapture(options);
    case StreamerOptions::Mode::kServe:
      return RunStreamerServe(options);
    case StreamerOptions::Mode::kExtract:
      return RunStreamerExtract(options);
  }
  return Status::Internal("unknown streamer mode");
}

}  // namespace vramflow
