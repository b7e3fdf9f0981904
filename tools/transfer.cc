// SPDX-License-Identifier: MIT
#include "tools/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "common/progress.h"
#include "streamer/base/base_store.h"
#include "streamer/budget_plan.h"
#include "streamer/format/verified_copy.h"
#include "tools/cli/cli_util.h"
#include "transport/core/uri.h"
#include "transport/net/shared_key.h"

namespace vramflow {

Status CopyStream(ByteSource& source, ByteSink& sink, const std::string& label, ProgressStyle progress,
                  uint64_t* bytes) {
  ProgressBar bar(label, 0, progress);
  std::vector<uint8_t> buf(1u << 20);
  for (;;) {
    VF_ASSIGN_OR_RETURN(size_t n, source.Read(buf));
    if (n == 0) break;
    VF_RETURN_IF_ERROR(sink.Write({buf.data(), n}));
    *bytes += n;
    bar.Update(*bytes);
  }
  return sink.Commit();
}

Status RunTransfer(const TransferOptions& options, const std::string& label, TransferReport* report) {
  // The sink first: a destination that cannot be written fails before any
  // sender connects.
  TransportOptions transport = options.transport;
  uint64_t verify_memory = options.max_memory;
  Result<Endpoint> from = ParseEndpoint(options.source);
  if (from.ok() && from->is_network())  // the receive window's share
    verify_memory = PlanReaderBudget(options.max_memory, options.source, &transport).pipeline;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(options.sink, transport));
  // recv: the bases offered to the sender, and what its stream may be built on.
  OpenBaseFn open_base;
  if (from.ok() && from->is_network()) {
    VF_ASSIGN_OR_RETURN(open_base, OfferStore(options.base_store, {}, /*stores=*/sink->Seekable(), &transport,
                                              StderrLog("recv"), verify_memory));
  } else if (!options.base_store.empty()) {
    return Status::InvalidArgument("--base-store offers bases to a sender; '" + options.source +
                                   "' is no network source");
  }
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(options.source, transport));
  Stopwatch clock;  // from the first connection: waiting for a sender is not transfer time
  // Whoever stores the stream verifies it: recv, and send to a file or an
  // object store. Sent to a receiver, the receiver does (its DONE says so).
  Result<Endpoint> to = ParseEndpoint(options.sink);
  const bool stored_here = !(to.ok() && to->is_network());
  Status status = stored_here ? CopyVerifiedStream(*source, *sink, label, options.progress, verify_memory,
                                                   &report->bytes, open_base)
                              : CopyStream(*source, *sink, label, options.progress, &report->bytes);
  report->peer = source->Describe();
  Status told = source->Finish(status);
  report->seconds = clock.Seconds();
  VF_RETURN_IF_ERROR(status);
  return told.ok() ? Status::Ok()
                   : told.WithContext("the stream is stored, but telling " + source->Describe() + " failed");
}

Status RunKeygen(const std::string& path, CleanupRegistry* cleanup) {
  VF_ASSIGN_OR_RETURN(std::string key, GenerateKeyText());
  key += "\n";
  if (path == "-") {
    // For a secret store's stdin (kubectl create secret ... --from-file=key=/dev/stdin).
    if (::write(STDOUT_FILENO, key.data(), key.size()) != static_cast<ssize_t>(key.size()))
      return Status::FromErrno("writing the key to stdout", errno);
    return Status::Ok();
  }
  // An interrupt before the key is written and synced removes the file.
  UniqueFd fd;
  VF_ASSIGN_OR_RETURN(CleanupEntry remove_if_interrupted,
                      CleanupEntry::Create(
                          cleanup,
                          [&] {
                            fd.Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
                            return fd.valid() ? Status::Ok()
                                              : Status::FromErrno("creating key file '" + path + "'", errno);
                          },
                          [path] { ::unlink(path.c_str()); }));
  if (::write(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()) || ::fsync(fd.get()) != 0) {
    Status s = Status::FromErrno("writing key file '" + path + "'", errno);
    ::unlink(path.c_str());
    return s;
  }
  return Status::Ok();
}

}  // namespace vramflow
