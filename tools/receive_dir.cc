// SPDX-License-Identifier: MIT
#include "tools/receive_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/printable.h"
#include "common/safe_path.h"
#include "common/units.h"
#include "streamer/base/base_store.h"
#include "streamer/budget_plan.h"
#include "streamer/format/verified_copy.h"
#include "tools/cli/cli_util.h"
#include "transport/core/fd_stream.h"
#include "transport/core/uri.h"
#include "transport/net/net_source.h"

namespace vramflow {
namespace {

// Whether `name` is a VRAM stream name of the CRIU plugin,
// amdgpu-vram-<decimal id>-<hex gpu_id>.img (plugin/kfd_image.h).
bool IsPluginStreamName(std::string_view name) {
  constexpr std::string_view kPrefix = "amdgpu-vram-", kSuffix = ".img";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return false;
  const std::string_view ids = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t dash = ids.find('-');
  auto only = [](std::string_view digits, std::string_view allowed) {
    return !digits.empty() && digits.size() <= 10 && digits.find_first_not_of(allowed) == std::string_view::npos;
  };
  return dash != std::string_view::npos && only(ids.substr(0, dash), "0123456789") &&
         only(ids.substr(dash + 1), "0123456789abcdef");
}

// Where a stream named `name` may go: nowhere but a new file in `dir`, or,
// with `overwrite` or where both are the plugin's VRAM streams (a later
// dump replacing its own earlier stream; docs/CLI.md, "Streams a dump
// replaces"), over a regular file there (never through a symlink, into
// a device or a FIFO). A name shaped like the temporary files of a writer
// (kTempMarker) is refused: it would be taken for a dead writer's leftover
// and removed. The error is the sender's answer too: it names the
// stream, not the directory (the receiver's log line says which).
Result<std::string> OutputPath(const std::string& dir, const std::string& name, bool overwrite) {
  VF_RETURN_IF_ERROR(CheckSafeFileName(name));
  if (name.find(kTempMarker) != std::string::npos)
    return Status::InvalidArgument(Printable(name) + " contains '" + kTempMarker +
                                   "', the mark of vramflow's temporary files, which are removed as leftovers");
  const std::string path = dir + "/" + name;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;
    return Status::FromErrno("checking where to store " + Printable(name), errno);
  }
  if (!S_ISREG(st.st_mode))
    return Status::AlreadyExists("a stream named " + Printable(name) +
                                 " cannot be stored: that name exists and is "
                                 "not a regular file");
  if (!overwrite && !IsPluginStreamName(name))
    return Status::AlreadyExists("a stream named " + Printable(name) +
                                 " exists (use --force to overwrite, on the "
                                 "receiver)");
  return path;
}

// What the sender of a stream that failed is told: the failure, with the
// directory it would have been stored in (the base store, by default) not
// named, nor its base store (docs/NETWORK.md, "What a sender learns"). The
// receiver's own line has them.
Status ForSender(const Status& status, const std::vector<std::string>& dirs) {
  if (status.ok()) return status;
  const std::string instead = "(the receiver's directory)";
  std::string message = status.message();
  for (const std::string& dir : dirs) {
    if (dir.empty()) continue;
    for (size_t at = message.find(dir); at != std::string::npos; at = message.find(dir, at + instead.size()))
      message.replace(at, dir.size(), instead);
  }
  return Status::WithCode(status.code(), std::move(message));
}

// Stores one stream; its sender learns the outcome.
Status StoreStream(const ReceiveDirOptions& options, uint64_t verify_memory, NetStream& stream,
                   const std::shared_ptr<const BaseStore>& store, const std::function<void()>& on_stored,
                   uint64_t* bytes) {
  Stopwatch clock;
  uint64_t received = 0;
  std::string path;
  Status status = [&]() -> Status {
    if (stream.name.empty())
      return Status::InvalidArgument(
          "the sender did not name its stream, and this receiver stores streams under "
          "their names (send it with `vramflow send --name NAME`)");
    VF_ASSIGN_OR_RETURN(path, OutputPath(options.dir, stream.name, options.transport.file.overwrite));
    FileSinkOptions file = options.transport.file;
    file.overwrite = file.overwrite || IsPluginStreamName(stream.name);  // as OutputPath allowed
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenFileSink(path, file));
    const BaseOffer offered = stream.offered.value_or(store->Offer(/*stores=*/true));
    return CopyVerifiedStream(*stream.source, *sink, "recv " + stream.name, options.progress, verify_memory, &received,
                              StoreBaseOpener(store, offered, options.transport, StderrLog("recv"), verify_memory));
  }();
  // Before the sender hears DONE, so that its next stream (the plugin sends
  // one right after) is offered this one.
  if (status.ok()) on_stored();
  Status told = stream.source->Finish(ForSender(status, {options.dir, options.base_store}));
  VF_RETURN_IF_ERROR(status);
  if (!told.ok()) return told.WithContext("stored " + path + ", but telling " + stream.source->Describe() + " failed");
  *bytes += received;
  if (options.notes)
    std::fprintf(stderr, "vramflow recv: stored %s (%s from %s in %.2f s, %s)\n", path.c_str(),
                 FormatSize(received).c_str(), stream.source->Describe().c_str(), clock.Seconds(),
                 FormatRate(received, clock.Seconds()).c_str());
  return Status::Ok();
}

}  // namespace

Status RunReceiveDirectory(const ReceiveDirOptions& options, ReceiveDirReport* report) {
  struct stat st;
  if (::stat(options.dir.c_str(), &st) != 0) return Status::FromErrno("output directory '" + options.dir + "'", errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("'" + options.dir + "' is not a directory");
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(options.listen));
  if (!endpoint.is_network()) return Status::InvalidArgument("--listen needs tcp://HOST:PORT, unix:PATH or systemd:");

  TransportOptions transport = options.transport;
  // The receive window's share; the rest verifies, and bounds a base chain's indexes.
  const uint64_t verify_memory = PlanReaderBudget(options.max_memory, options.listen, &transport).pipeline;
  NetOptions net = transport.net;
  net.sessions = 0;  // one after another, as many as arrive
  net.name.clear();  // any name; checked here
  const std::string store_dir = options.base_store.empty() ? options.dir : options.base_store;
  auto scan = [&]() -> Result<std::shared_ptr<const BaseStore>> {
    VF_ASSIGN_OR_RETURN(BaseStore store, ScanBaseStore(store_dir, options.transport, kMaxStoreStreams, verify_memory));
    if (options.notes)
      std::fprintf(stderr, "vramflow recv: base store %s: %zu stream(s) to offer (%zu newest files read, %s)\n",
                   store_dir.c_str(), store.streams.size(), store.files_read, FormatSize(store.bytes_read).c_str());
    return std::make_shared<const BaseStore>(std::move(store));
  };
  VF_ASSIGN_OR_RETURN(std::shared_ptr<const BaseStore> store, scan());
  net.base_offer = store->Offer(/*stores=*/true);
  // SIGINT, SIGTERM and SIGHUP are the command's (tools/cli/interrupt.h): the
  // stream being received tells its sender, and its temporary file goes.
  VF_ASSIGN_OR_RETURN(std::unique_ptr<NetReceiver> receiver, NetReceiver::Listen(endpoint, net));
  if (options.notes)
    std::fprintf(stderr, "vramflow recv: listening on %s, storing streams in %s\n", receiver->uri().c_str(),
                 options.dir.c_str());

  while (options.count == 0 || report->stored < options.count) {
    Result<NetStream> stream = receiver->AcceptStream(options.transport.accept_timeout);
    if (!stream.ok()) {
      if (stream.status().code() == Status::Code::kTimedOut) return stream.status();
      // A sender that named the stream and then vanished, say: its own failure.
      std::fprintf(stderr, "vramflow recv: a stream was not received: %s\n", stream.status().ToString().c_str());
      ++report->failed;
      continue;
    }
    const std::string name = stream->name;
    const std::string peer = stream->source->Describe();
    // The stream just stored may be the next one's base.
    auto rescan = [&] {
      Result<std::shared_ptr<const BaseStore>> rescanned = scan();
      if (rescanned.ok()) {
        store = std::move(*rescanned);
        receiver->OfferBases(store->Offer(/*stores=*/true));
      } else {
        std::fprintf(stderr, "vramflow recv: the base store was not scanned again: %s\n",
                     rescanned.status().ToString().c_str());
      }
    };
    Status s = StoreStream(options, verify_memory, *stream, store, rescan, &report->bytes);
    if (s.ok()) {
      ++report->stored;
      continue;
    }
    ++report->failed;
    const std::string what = name.empty() ? "an unnamed stream" : "the stream " + Printable(name);
    std::fprintf(stderr, "vramflow recv: %s from %s was not stored: %s\n", what.c_str(), peer.c_str(),
                 s.ToString().c_str());
  }
  if (report->failed)
    return Status::IoError(std::to_string(report->failed) + " of " + std::to_string(report->failed + report->stored) +
                           " streams sent to " + options.listen + " were not stored (see above)");
  return Status::Ok();
}

}  // namespace vramflow
