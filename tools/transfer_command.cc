// SPDX-License-Identifier: MIT
#include "tools/transfer_command.h"

#include <cstdio>

#include "common/units.h"
#include "tools/cli/cli_uri.h"
#include "tools/cli/cli_util.h"
#include "tools/json_report.h"
#include "tools/receive_dir.h"
#include "transport/core/uri.h"

namespace vramflow {

void SendCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "send",
      "Send a stream as it is from SRC to DEST, typically a file to a `vramflow recv` on another host. "
      "Succeeds only once the receiver has stored the whole stream");
  cmd_->add_option("source", options_.source, "a file, - (stdin), fd:N or s3://BUCKET/KEY")->required();
  cmd_->add_option("destination", options_.sink,
                   "tcp://HOST:PORT or unix:PATH (connects to a receiver there), s3://BUCKET/KEY, or any other "
                   "sink URI (a file, - for stdout, fd:N)")
      ->required();
  out_.Add(cmd_, /*with_json=*/true);
  cmd_->add_flag("-f,--force", force_, "overwrite an existing destination file or S3 object");
  cmd_->add_option("--name", stream_name_,
                   "name the stream (network destinations): `recv --output-dir` stores it under this name");
  fsync_.Add(cmd_, "off; to a receiver, the receiver's own setting counts");
  net_.Add(cmd_, /*sending=*/true, /*receiving=*/false);
}

Status SendCommand::Resolve() {
  VF_RETURN_IF_ERROR(CheckReadUri(options_.source, "vramflow recv"));
  VF_RETURN_IF_ERROR(CheckWriteUri(options_.sink));
  VF_RETURN_IF_ERROR(out_.CheckStdout(options_.sink));
  VF_RETURN_IF_ERROR(net_.Resolve(&options_.transport));
  if (!stream_name_.empty()) {
    Result<Endpoint> endpoint = ParseEndpoint(options_.sink);
    if (endpoint.ok() && !endpoint->is_network())
      return Status::InvalidArgument("--name names a stream sent to tcp:// or unix:, not " + options_.sink);
    options_.transport.net.name = stream_name_;
  }
  return Status::Ok();
}

Status SendCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  VF_RETURN_IF_ERROR(CheckDestination(options_.sink, force_));
  VF_RETURN_IF_ERROR(net_.LoadCredentials(&options_.transport));
  options_.transport.file.overwrite = force_;
  options_.transport.s3.overwrite = force_;
  options_.transport.file.fsync = fsync_.Resolve(/*default_on=*/false);
  options_.progress = out_.Style();
  TransferReport report;
  VF_RETURN_IF_ERROR(RunTransfer(options_, "send", &report));
  if (out_.json) PrintJson(TransferJson("send", report, options_.source, options_.sink));
  if (out_.summary())
    std::fprintf(stderr, "sent %s to %s in %.2f s (%s); the receiver stored all of it\n",
                 FormatSize(report.bytes).c_str(), options_.sink.c_str(), report.seconds,
                 FormatRate(report.bytes, report.seconds).c_str());
  return Status::Ok();
}

void RecvCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "recv",
      "Receive a stream from a sender (send, pack --to, demo --to, the plugin) and store it at -o OUT, or "
      "streams one after another into --output-dir DIR, each under the name its sender gave it (the plugin "
      "names each GPU's stream after its image). Output appears only once a whole stream has arrived; other "
      "senders are refused while one is active. "
      "(To restore as it arrives instead, give the address to `unpack` or `demo --listen`.)");
  cmd_->add_option("--listen", options_.source,
                   "address to listen on: tcp://HOST:PORT (HOST may be empty) or unix:PATH")
      ->required();
  CLI::Option* output = cmd_->add_option("-o,--output", options_.sink,
                                         "where to store the stream: a file, - (stdout), fd:N, s3://BUCKET/KEY");
  CLI::Option* dir = cmd_->add_option(
      "-d,--output-dir", dir_,
      "take streams one after another and store each in this existing directory under the name its sender gave it");
  output->excludes(dir);
  cmd_->add_option("--base-store", base_store_,
                   "earlier streams a sender may build its stream on, offered to it (default with --output-dir: "
                   "that directory)");
  cmd_->add_option("--count", count_, "with --output-dir: stop after storing N streams (default: at SIGINT/SIGTERM)")
      ->needs(dir)
      ->check(CLI::PositiveNumber);
  cmd_->add_flag("-f,--force", force_, "overwrite an existing output file or S3 object");
  fsync_.Add(cmd_, "on: the sender is told DONE only once the stream is durable");
  out_.Add(cmd_, /*with_json=*/true);
  net_.Add(cmd_, /*sending=*/false, /*receiving=*/true);
  memory_.Add(cmd_, "the receive window (a quarter, at most 64M) and the verification of the stream");
}

Status RecvCommand::Resolve() {
  VF_RETURN_IF_ERROR(CheckListenUri(options_.source));
  if (!options_.sink.empty()) VF_RETURN_IF_ERROR(CheckWriteUri(options_.sink));
  VF_RETURN_IF_ERROR(RefuseDash("--output-dir", dir_));
  VF_RETURN_IF_ERROR(out_.CheckStdout(options_.sink));
  VF_RETURN_IF_ERROR(net_.Resolve(&options_.transport));
  if (dir_.empty() && options_.sink.empty())
    return Status::InvalidArgument("give -o OUT (one stream) or --output-dir DIR (streams by name)");
  return Status::Ok();
}

Status RecvCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  if (!options_.sink.empty()) VF_RETURN_IF_ERROR(CheckDestination(options_.sink, force_));
  VF_RETURN_IF_ERROR(net_.LoadCredentials(&options_.transport));
  options_.transport.file.overwrite = force_;
  options_.transport.s3.overwrite = force_;
  options_.transport.file.fsync = fsync_.Resolve(/*default_on=*/true);
  options_.progress = out_.Style();
  options_.max_memory = memory_.Resolve();
  return dir_.empty() ? RunOne() : RunIntoDirectory();
}

Status RecvCommand::RunIntoDirectory() {
  ReceiveDirOptions dir_options;
  dir_options.listen = options_.source;
  dir_options.dir = dir_;
  dir_options.count = count_;
  dir_options.transport = options_.transport;
  dir_options.progress = out_.Style();
  dir_options.notes = !out_.quiet;
  dir_options.max_memory = options_.max_memory;
  dir_options.base_store = base_store_;
  ReceiveDirReport report;
  Status s = RunReceiveDirectory(dir_options, &report);
  if (s.ok() && out_.json) PrintJson(ReceiveDirJson(report, options_.source, dir_));
  if (out_.summary() && (s.ok() || report.stored > 0))  // not after a failure to start
    std::fprintf(stderr, "vramflow recv: stored %u stream(s), %s, in %s\n", report.stored,
                 FormatSize(report.bytes).c_str(), dir_.c_str());
  return s;
}

Status RecvCommand::RunOne() {
  // Only once bound (after the output could be opened), with the real port.
  if (!out_.quiet)
    options_.transport.on_listening = [](const std::string& uri) {
      std::fprintf(stderr, "vramflow recv: listening on %s\n", uri.c_str());
    };
  options_.base_store = base_store_;
  TransferReport report;
  VF_RETURN_IF_ERROR(RunTransfer(options_, "recv", &report));
  if (out_.json) PrintJson(TransferJson("recv", report, options_.source, options_.sink));
  if (out_.summary())
    std::fprintf(stderr, "received %s from %s in %.2f s (%s), stored in %s\n", FormatSize(report.bytes).c_str(),
                 report.peer.c_str(), report.seconds, FormatRate(report.bytes, report.seconds).c_str(),
                 options_.sink.c_str());
  return Status::Ok();
}

void KeygenCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand("keygen",
                                "Write a new random shared key (for --key-file / VRAMFLOW_KEY_FILE); copy it to the "
                                "other host securely");
  cmd_->add_option("-o,--output", output_, "key file to create (mode 0600; never overwritten), or - for stdout")
      ->required();
}

Status KeygenCommand::Resolve() {
  VF_ASSIGN_OR_RETURN(Endpoint out, ParseEndpoint(output_));
  if (out.kind != Endpoint::Kind::kPath && out.kind != Endpoint::Kind::kStdio)
    return Status::InvalidArgument("-o '" + output_ + "': give a file to create, or - for stdout");
  return Status::Ok();
}

Status KeygenCommand::Run(const CommandContext& context) {
  VF_RETURN_IF_ERROR(RunKeygen(output_, context.cleanup));
  if (output_ != "-")
    std::fprintf(stderr, "wrote a new key to %s (keep it secret; both ends need it)\n", output_.c_str());
  return Status::Ok();
}

}  // namespace vramflow
