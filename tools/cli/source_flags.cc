// SPDX-License-Identifier: MIT
#include "tools/cli/source_flags.h"

#include "tools/cli/cli_uri.h"

namespace vramflow {
namespace {

constexpr const char* kStreamUris = "a file, - (stdin), fd:N, s3://BUCKET/KEY";

}  // namespace

void SourceFlags::AddStreamOrListen(CLI::App* cmd, const std::string& what) {
  CLI::Option* stream_option = cmd->add_option("stream", stream, std::string("stream to read: ") + kStreamUris);
  cmd->add_option("--listen", listen, "instead of STREAM: listen on tcp://HOST:PORT or unix:PATH and " + what)
      ->excludes(stream_option);
  with_listen_ = true;
}

void SourceFlags::AddStream(CLI::App* cmd, const std::string& what) {
  cmd->add_option("stream", stream, what + " to read: " + kStreamUris)->required();
}

void SourceFlags::AddBases(CLI::App* cmd, const std::string& help) { cmd->add_option("--base", bases, help); }

void SourceFlags::AddBaseStore(CLI::App* cmd) {
  cmd->add_option("--base-store", base_store,
                  "with --listen: earlier streams the sender may build its stream on, offered to it");
}

Status SourceFlags::PickStream(const std::string& command, std::string* uri) const {
  if (!with_listen_) {
    *uri = stream;
  } else if (!listen.empty()) {
    VF_RETURN_IF_ERROR(CheckListenUri(listen));
    *uri = listen;
  } else if (stream.empty()) {
    return Status::InvalidArgument(
        "missing the stream to read: give STREAM, or --listen tcp://HOST:PORT or unix:PATH to receive one");
  } else {
    VF_RETURN_IF_ERROR(CheckReadUri(stream, "vramflow " + command));
    *uri = stream;
  }
  return Status::Ok();
}

}  // namespace vramflow
