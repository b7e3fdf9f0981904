// SPDX-License-Identifier: MIT
// SimKfdServer: one accept thread, one thread per connection. Each request
// is decoded (sim_kfd_wire.h), run on the SimKfd, and answered with the
// op's Status, body and fds. A request whose body or fds do not fit its op
// gets an error reply; a connection whose framing breaks, that closes
// mid-message or stalls for io_timeout is dropped. Either way the server
// goes on serving everyone else.
#include "sim/kfd/sim_kfd_service.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/thread_start.h"
#include "sim/kfd/sim_kfd_wire.h"

namespace vramflow {
namespace {

using sim_wire::Op;
using sim_wire::Reader;
using sim_wire::Request;
using sim_wire::Writer;

// What the server sends back for one request.
struct Answer {
  Writer body;
  std::vector<UniqueFd> fds;
};

// The body was read to its end and exactly `fds` fds came (at least `fds`
// with `or_more`).
Status Expect(const Request& request, const Reader& in, size_t fds, bool or_more = false) {
  const std::string what = std::string("simulated KFD ") + sim_wire::OpName(request.op) + " request";
  VF_RETURN_IF_ERROR(in.Done(what));
  if (request.fds.size() < fds || (!or_more && request.fds.size() != fds)) {
    return Status::InvalidArgument(what + " with " + std::to_string(request.fds.size()) + " fds, needs " +
                                   std::to_string(fds) + (or_more ? " or more" : ""));
  }
  return Status::Ok();
}

// Moves a dma-buf fd the SimKfd handed out into the answer; returns its
// index there (or kKfdNoFd for none).
int32_t AddFd(int fd, Answer* out) {
  if (fd < 0) return kKfdNoFd;
  out->fds.emplace_back(fd);
  return static_cast<int32_t>(out->fds.size() - 1);
}

Status HandleCheckpoint(KfdOps& ops, Request& request, Answer* out) {
  Reader in(request.body);
  const KfdProcessInfo info = sim_wire::GetProcessInfo(&in);
  VF_RETURN_IF_ERROR(Expect(request, in, 1));
  VF_ASSIGN_OR_RETURN(KfdCheckpoint state, ops.Checkpoint(request.fds[0].get(), info));
  for (KfdBo& bo : state.bos) bo.dmabuf_fd = AddFd(bo.dmabuf_fd, out);
  sim_wire::PutCheckpoint(state, &out->body);
  return Status::Ok();
}

Status HandleRestore(KfdOps& ops, Request& request, Answer* out) {
  Reader in(request.body);
  VF_ASSIGN_OR_RETURN(KfdCheckpoint state, sim_wire::GetCheckpoint(&in));
  VF_RETURN_IF_ERROR(Expect(request, in, 1, /*or_more=*/true));
  // drm_fd indexes point past fds[0], the KFD file.
  for (KfdDevice& d : state.devices) {
    if (d.drm_fd == kKfdNoFd) continue;
    if (d.drm_fd < 1 || static_cast<size_t>(d.drm_fd) >= request.fds.size()) {
      return Status::InvalidArgument("simulated KFD Restore request: drm_fd index " + std::to_string(d.drm_fd) +
                                     " of " + std::to_string(request.fds.size()) + " fds");
    }
    d.drm_fd = request.fds[d.drm_fd].get();
  }
  for (KfdBo& bo : state.bos) bo.dmabuf_fd = kKfdNoFd;
  VF_RETURN_IF_ERROR(ops.Restore(request.fds[0].get(), &state));
  for (KfdBo& bo : state.bos) {
    out->body.U64(bo.restored_offset);
    out->body.I32(AddFd(bo.dmabuf_fd, out));
  }
  return Status::Ok();
}

Status Handle(SimKfd& kfd, KfdOps& ops, Request& request, Answer* out) {
  Reader in(request.body);
  switch (request.op) {
    case Op::kGetVersion: {
      VF_RETURN_IF_ERROR(Expect(request, in, 0));
      uint32_t major = 0, minor = 0;
      VF_RETURN_IF_ERROR(ops.GetVersion(&major, &minor));
      out->body.U32(major);
      out->body.U32(minor);
      return Status::Ok();
    }
    case Op::kProcessInfo: {
      const pid_t pid = in.I32();
      VF_RETURN_IF_ERROR(Expect(request, in, 1));
      VF_ASSIGN_OR_RETURN(KfdProcessInfo info, ops.ProcessInfo(request.fds[0].get(), pid));
      sim_wire::PutProcessInfo(info, &out->body);
      return Status::Ok();
    }
    case Op::kCheckpoint:
      return HandleCheckpoint(ops, request, out);
    case Op::kUnpause:
      VF_RETURN_IF_ERROR(Expect(request, in, 1));
      return ops.Unpause(request.fds[0].get());
    case Op::kRestore:
      return HandleRestore(ops, request, out);
    case Op::kResume: {
      const pid_t pid = in.I32();
      VF_RETURN_IF_ERROR(Expect(request, in, 1));
      return ops.Resume(request.fds[0].get(), pid);
    }
    case Op::kOpenKfd: {
      const pid_t pid = in.I32();
      VF_RETURN_IF_ERROR(Expect(request, in, 0));
      if (pid <= 0) return Status::InvalidArgument("simulated KFD OpenKfd for pid " + std::to_string(pid));
      VF_ASSIGN_OR_RETURN(UniqueFd fd, kfd.OpenKfd(pid));
      out->fds.push_back(std::move(fd));
      return Status::Ok();
    }
    case Op::kOpenRenderNode: {
      const uint32_t gpu_id = in.U32();
      VF_RETURN_IF_ERROR(Expect(request, in, 0));
      VF_ASSIGN_OR_RETURN(UniqueFd fd, kfd.OpenRenderNode(gpu_id));
      out->fds.push_back(std::move(fd));
      return Status::Ok();
    }
    case Op::kClassify: {
      const uint64_t dev = in.U64(), ino = in.U64();
      VF_RETURN_IF_ERROR(Expect(request, in, 0));
      out->body.U32(static_cast<uint32_t>(kfd.FileKind(dev, ino)));
      out->body.U32(kfd.FileGpu(dev, ino));
      return Status::Ok();
    }
    case Op::kListDrmBos: {
      VF_RETURN_IF_ERROR(Expect(request, in, 1));
      VF_ASSIGN_OR_RETURN(std::vector<DrmBo> bos, kfd.ListDrmBos(request.fds[0].get()));
      out->body.U32(static_cast<uint32_t>(bos.size()));
      for (const DrmBo& bo : bos) {
        out->body.U32(bo.handle);
        out->body.U64(bo.size);
        out->body.U32(bo.imported ? 1 : 0);
      }
      return Status::Ok();
    }
  }
  return Status::Internal("simulated KFD: unhandled op");  // RecvRequest admits known ops only
}

}  // namespace

Result<std::unique_ptr<SimKfdServer>> SimKfdServer::Start(SimKfd* kfd, const std::string& socket_path,
                                                          std::chrono::milliseconds io_timeout) {
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kUnix;
  endpoint.path = socket_path;
  endpoint.uri = "unix:" + socket_path;
  SocketOptions options;
  options.io_timeout = io_timeout;
  Result<Listener> listener = Listener::Open(endpoint, options);
  if (!listener.ok()) return listener.status().WithContext("starting the simulated KFD service");
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop.valid()) return Status::FromErrno("starting the simulated KFD service: eventfd", errno);
  std::unique_ptr<SimKfdServer> server(
      new SimKfdServer(kfd, std::move(listener).value(), std::move(stop), socket_path, io_timeout));
  VF_RETURN_IF_ERROR(StartThread(&server->accept_thread_, "the simulated KFD service on " + socket_path,
                                 [s = server.get()] { s->AcceptLoop(); }));
  return server;
}

SimKfdServer::SimKfdServer(SimKfd* kfd, Listener listener, UniqueFd stop, std::string socket_path,
                           std::chrono::milliseconds io_timeout)
    : kfd_(kfd),
      ops_(kfd->Ops()),
      listener_(std::move(listener)),
      stop_(std::move(stop)),
      socket_path_(std::move(socket_path)),
      io_timeout_(io_timeout) {}

SimKfdServer::~SimKfdServer() {
  const uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of a counter overflow; the
  // threads see it readable from now on.
  (void)!::write(stop_.get(), &one, sizeof(one));
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& connection : connections_) connection->thread.join();
  // listener_ removes the socket file.
}

bool SimKfdServer::WaitReadable(int fd) const {
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || p[1].revents != 0) return false;
    return true;  // data, or EOF/an error that the next call reports
  }
}

void SimKfdServer::AcceptLoop() {
  while (WaitReadable(listener_.fd())) {
    Result<UniqueFd> fd = listener_.Accept(std::chrono::milliseconds(0), nullptr);
    if (!fd.ok()) {
      // The client left before we took it (kTimedOut), or no fds left:
      // back off a little rather than spin, and keep serving the others.
      if (fd.status().code() != Status::Code::kTimedOut) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!(*it)->done) {
        ++it;
        continue;
      }
      (*it)->thread.join();
      it = connections_.erase(it);
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = std::move(fd).value();
    // No thread for it: the client sees its connection closed, the server
    // goes on serving the others.
    if (!StartThread(&connection->thread, "a simulated KFD client", [this, c = connection.get()] { Serve(c); }).ok())
      continue;
    ++accepted_;
    connections_.push_back(std::move(connection));
  }
}

void SimKfdServer::Serve(Connection* connection) {
  const int fd = connection->fd.get();
  while (WaitReadable(fd)) {
    Result<Request> request = sim_wire::RecvRequest(fd, io_timeout_);
    if (!request.ok()) break;  // closed, garbage or stalled: drop it
    Answer answer;
    Status status = Handle(*kfd_, *ops_, *request, &answer);
    if (!status.ok()) answer = Answer{};  // an error carries no body and no fds
    std::vector<int> fds;
    for (const UniqueFd& f : answer.fds) fds.push_back(f.get());
    if (!sim_wire::SendReply(fd, status, answer.body.bytes(), fds, io_timeout_).ok()) break;
  }
  connection->fd.Reset();  // the client sees EOF now, not when the thread is reaped
  connection->done = true;
}

}  // namespace vramflow
