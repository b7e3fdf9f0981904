// SPDX-License-Identifier: MIT
// The client side of the simulated KFD service: a GpuBackend whose KFD ops,
// files and classification are requests to the server (sim_kfd_wire.h),
// and whose topology and DMA devices are local (the sysfs fixture, SimDevice
// on the dma-buf memfds the server hands out).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "sim/kfd/sim_kfd_service.h"
#include "sim/kfd/sim_kfd_wire.h"

namespace vramflow {
namespace {

using sim_wire::Op;
using sim_wire::Reader;
using sim_wire::Reply;
using sim_wire::Writer;

std::string HexId(uint32_t id) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", id);
  return text;
}

// Moves reply fd `index` (kKfdNoFd: none) out as the caller's raw fd; every
// index may be taken once.
Result<int> TakeFd(Reply* reply, int32_t index, const std::string& what) {
  if (index == kKfdNoFd) return kKfdNoFd;
  if (index < 0 || static_cast<size_t>(index) >= reply->fds.size() || !reply->fds[index].valid()) {
    return Status::Corruption(what + ": fd index " + std::to_string(index) + " of " +
                              std::to_string(reply->fds.size()) + " fds, or used twice");
  }
  return reply->fds[index].Release();
}

class SimGpuBackend;

// KfdOps as requests; the KFD fd argument travels as an fd.
class RemoteKfdOps final : public KfdOps {
 public:
  explicit RemoteKfdOps(SimGpuBackend* backend) : backend_(backend) {}
  Status GetVersion(uint32_t* major, uint32_t* minor) override;
  Result<KfdProcessInfo> ProcessInfo(int kfd_fd, pid_t pid) override;
  Result<KfdCheckpoint> Checkpoint(int kfd_fd, const KfdProcessInfo& info) override;
  Status Unpause(int kfd_fd) override;
  Status Restore(int kfd_fd, KfdCheckpoint* state) override;
  Status Resume(int kfd_fd, pid_t pid) override;

 private:
  SimGpuBackend* backend_;
};

class SimGpuBackend final : public GpuBackend {
 public:
  SimGpuBackend(std::string socket_path, std::string topology_root, SimDeviceOptions device_options)
      : socket_path_(std::move(socket_path)),
        topology_root_(std::move(topology_root)),
        device_options_(device_options),
        ops_(this) {}

  std::string Describe() const override { return "simulated KFD at " + socket_path_; }
  KfdOps& Kfd() override { return ops_; }
  Result<GpuFileKind> Classify(const struct stat& st) override;
  Result<uint32_t> RenderNodeGpuId(const struct stat& st) override;
  Result<UniqueFd> OpenKfd() override;
  // Classify's answer, with the GPU of a render node.
  Result<std::pair<GpuFileKind, uint32_t>> ClassifyFile(const struct stat& st);
  Result<Topology> LocalTopology() override { return ParseTopology(topology_root_); }
  Result<UniqueFd> OpenRenderNode(const KfdNode& gpu) override;
  std::string RenderNodePath(const KfdNode& gpu) const override {
    return "/dev/dri/renderD" + std::to_string(gpu.drm_render_minor);
  }
  Result<std::unique_ptr<Device>> OpenDevice(const KfdNode& gpu) override {
    return std::unique_ptr<Device>(std::make_unique<SimDevice>("gpu " + HexId(gpu.gpu_id), device_options_));
  }
  // As a DRM file of this backend's own would: one handle per BO (a
  // dma-buf is the BO's memfd, so its inode names the BO), counted from 1.
  Result<uint32_t> GemHandle(const KfdNode& gpu, int dmabuf_fd) override;
  Result<std::vector<DrmBo>> ListDrmBos(int render_fd) override;

  // This process's connection, made now if it has none (or inherited one).
  Status Connect() {
    std::lock_guard lock(mu_);
    return ConnectLocked();
  }
  // One request and its reply. The server's error comes back as is; a
  // broken exchange drops the connection (the next call makes a new one).
  Result<Reply> Call(Op op, const Writer& body, std::span<const int> fds);

 private:
  Status ConnectLocked();
  Result<Reply> CallLocked(Op op, const Writer& body, std::span<const int> fds);

  const std::string socket_path_;
  const std::string topology_root_;
  const SimDeviceOptions device_options_;
  RemoteKfdOps ops_;
  std::mutex mu_;
  // gpu_id -> (dev, ino) of a BO's memory -> its GEM handle. GUARDED_BY(mu_)
  std::map<uint32_t, std::map<std::pair<uint64_t, uint64_t>, uint32_t>> gem_handles_;
  UniqueFd connection_;                        // GUARDED_BY(mu_)
  pid_t connection_pid_ = 0;                   // GUARDED_BY(mu_): the process that made connection_
  const pid_t connection_owner_ = ::getpid();  // the process that keeps its connection between calls
};

Status SimGpuBackend::ConnectLocked() {
  if (connection_.valid() && connection_pid_ == ::getpid()) return Status::Ok();
  // After fork(): the parent's socket is forgotten, not closed. In a task
  // CRIU restores, CRIU has closed every inherited fd already and may have
  // installed one of the task's own files under that number.
  if (connection_pid_ != ::getpid()) static_cast<void>(connection_.Release());
  connection_.Reset();
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kUnix;
  endpoint.path = socket_path_;
  endpoint.uri = "unix:" + socket_path_;
  SocketOptions options;
  options.connect_timeout = kSimKfdIoTimeout;
  options.io_timeout = kSimKfdIoTimeout;
  Result<UniqueFd> fd = ConnectStream(endpoint, options);
  if (!fd.ok()) return fd.status().WithContext("connecting to the simulated KFD service");
  connection_ = std::move(fd).value();
  connection_pid_ = ::getpid();
  return Status::Ok();
}

Result<Reply> SimGpuBackend::Call(Op op, const Writer& body, std::span<const int> fds) {
  std::lock_guard lock(mu_);
  // Only the process that connected keeps a connection between calls. In a
  // forked one (a task CRIU restores) each call has its own: the kernel's
  // KFD leaves no fd behind in a task, and a kept socket would take an fd
  // number CRIU is about to install one of the task's own files at.
  const bool keep = connection_owner_ == ::getpid();
  VF_RETURN_IF_ERROR(ConnectLocked());
  Result<Reply> reply = CallLocked(op, body, fds);
  if (!keep || !reply.ok()) connection_.Reset();
  if (!reply.ok()) return reply.status().WithContext(Describe());
  if (!reply->status.ok()) return reply->status;
  return reply;
}

Result<Reply> SimGpuBackend::CallLocked(Op op, const Writer& body, std::span<const int> fds) {
  VF_RETURN_IF_ERROR(sim_wire::SendRequest(connection_.get(), op, body.bytes(), fds, kSimKfdIoTimeout));
  return sim_wire::RecvReply(connection_.get(), kSimKfdIoTimeout);
}

Result<std::pair<GpuFileKind, uint32_t>> SimGpuBackend::ClassifyFile(const struct stat& st) {
  Writer body;
  body.U64(st.st_dev);
  body.U64(st.st_ino);
  VF_ASSIGN_OR_RETURN(Reply reply, Call(Op::kClassify, body, {}));
  Reader in(reply.body);
  const uint32_t kind = in.U32();
  const uint32_t gpu_id = in.U32();
  VF_RETURN_IF_ERROR(in.Done("simulated KFD Classify reply"));
  switch (static_cast<GpuFileKind>(kind)) {
    case GpuFileKind::kNone:
    case GpuFileKind::kKfd:
    case GpuFileKind::kRenderNode:
      return std::pair{static_cast<GpuFileKind>(kind), gpu_id};
  }
  return Status::Corruption("simulated KFD Classify reply: unknown kind " + std::to_string(kind));
}

Result<GpuFileKind> SimGpuBackend::Classify(const struct stat& st) {
  VF_ASSIGN_OR_RETURN(auto file, ClassifyFile(st));
  return file.first;
}

Result<uint32_t> SimGpuBackend::RenderNodeGpuId(const struct stat& st) {
  VF_ASSIGN_OR_RETURN(auto file, ClassifyFile(st));
  if (file.first != GpuFileKind::kRenderNode) return Status::InvalidArgument(Describe() + ": not a render node");
  return file.second;
}

// The one fd a reply must carry.
Result<UniqueFd> OneFd(Reply reply, const std::string& what) {
  VF_RETURN_IF_ERROR(Reader(reply.body).Done(what));
  if (reply.fds.size() != 1) {
    return Status::Corruption(what + ": " + std::to_string(reply.fds.size()) + " fds instead of 1");
  }
  return std::move(reply.fds[0]);
}

Result<uint32_t> SimGpuBackend::GemHandle(const KfdNode& gpu, int dmabuf_fd) {
  struct stat st {};
  if (::fstat(dmabuf_fd, &st) != 0)
    return Status::FromErrno("importing a dma-buf into the simulated renderD" + std::to_string(gpu.drm_render_minor),
                             errno);
  std::lock_guard lock(mu_);
  auto& handles = gem_handles_[gpu.gpu_id];
  auto [it, added] = handles.emplace(std::pair<uint64_t, uint64_t>(st.st_dev, st.st_ino), 0);
  if (added) it->second = static_cast<uint32_t>(handles.size());
  return it->second;
}

Result<std::vector<DrmBo>> SimGpuBackend::ListDrmBos(int render_fd) {
  const int fds[] = {render_fd};
  VF_ASSIGN_OR_RETURN(Reply reply, Call(Op::kListDrmBos, Writer(), fds));
  Reader in(reply.body);
  const uint32_t count = in.U32();
  std::vector<DrmBo> bos;
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    DrmBo bo;
    bo.handle = in.U32();
    bo.size = in.U64();
    bo.imported = in.U32() != 0;
    bos.push_back(bo);
  }
  VF_RETURN_IF_ERROR(in.Done("simulated KFD ListDrmBos reply"));
  return bos;
}

Result<UniqueFd> SimGpuBackend::OpenKfd() {
  Writer body;
  body.I32(::getpid());
  VF_ASSIGN_OR_RETURN(Reply reply, Call(Op::kOpenKfd, body, {}));
  return OneFd(std::move(reply), "simulated KFD OpenKfd reply");
}

Result<UniqueFd> SimGpuBackend::OpenRenderNode(const KfdNode& gpu) {
  Writer body;
  body.U32(gpu.gpu_id);
  VF_ASSIGN_OR_RETURN(Reply reply, Call(Op::kOpenRenderNode, body, {}));
  return OneFd(std::move(reply), "simulated KFD OpenRenderNode reply");
}

Status RemoteKfdOps::GetVersion(uint32_t* major, uint32_t* minor) {
  VF_ASSIGN_OR_RETURN(Reply reply, backend_->Call(Op::kGetVersion, Writer(), {}));
  Reader in(reply.body);
  const uint32_t got_major = in.U32(), got_minor = in.U32();
  VF_RETURN_IF_ERROR(in.Done("simulated KFD GetVersion reply"));
  *major = got_major;
  *minor = got_minor;
  return Status::Ok();
}

Result<KfdProcessInfo> RemoteKfdOps::ProcessInfo(int kfd_fd, pid_t pid) {
  Writer body;
  body.I32(pid);
  const int fds[] = {kfd_fd};
  VF_ASSIGN_OR_RETURN(Reply reply, backend_->Call(Op::kProcessInfo, body, fds));
  Reader in(reply.body);
  KfdProcessInfo info = sim_wire::GetProcessInfo(&in);
  VF_RETURN_IF_ERROR(in.Done("simulated KFD ProcessInfo reply"));
  return info;
}

Result<KfdCheckpoint> RemoteKfdOps::Checkpoint(int kfd_fd, const KfdProcessInfo& info) {
  const std::string what = "simulated KFD Checkpoint reply";
  Writer body;
  sim_wire::PutProcessInfo(info, &body);
  const int fds[] = {kfd_fd};
  VF_ASSIGN_OR_RETURN(Reply reply, backend_->Call(Op::kCheckpoint, body, fds));
  Reader in(reply.body);
  VF_ASSIGN_OR_RETURN(KfdCheckpoint state, sim_wire::GetCheckpoint(&in));
  VF_RETURN_IF_ERROR(in.Done(what));
  // The fds stay in `owned` until every index checked out.
  std::vector<UniqueFd> owned;
  for (KfdBo& bo : state.bos) {
    VF_ASSIGN_OR_RETURN(bo.dmabuf_fd, TakeFd(&reply, bo.dmabuf_fd, what));
    if (bo.dmabuf_fd != kKfdNoFd) owned.emplace_back(bo.dmabuf_fd);
  }
  if (owned.size() != reply.fds.size()) {
    return Status::Corruption(what + ": " + std::to_string(reply.fds.size() - owned.size()) + " fds no BO names");
  }
  for (UniqueFd& fd : owned) fd.Release();  // now the caller's, in state.bos
  return state;
}

Status RemoteKfdOps::Unpause(int kfd_fd) {
  const int fds[] = {kfd_fd};
  return backend_->Call(Op::kUnpause, Writer(), fds).status();
}

Status RemoteKfdOps::Restore(int kfd_fd, KfdCheckpoint* state) {
  const std::string what = "simulated KFD Restore reply";
  // The wire form: fds are [kfd, drm fds...], drm_fd fields their indexes.
  KfdCheckpoint wire = *state;
  std::vector<int> fds = {kfd_fd};
  for (KfdDevice& d : wire.devices) {
    if (d.drm_fd == kKfdNoFd) continue;
    fds.push_back(d.drm_fd);
    d.drm_fd = static_cast<int>(fds.size() - 1);
  }
  for (KfdBo& bo : wire.bos) bo.dmabuf_fd = kKfdNoFd;
  Writer body;
  sim_wire::PutCheckpoint(wire, &body);
  VF_ASSIGN_OR_RETURN(Reply reply, backend_->Call(Op::kRestore, body, fds));
  Reader in(reply.body);
  std::vector<std::pair<uint64_t, int32_t>> restored;  // restored_offset, fd index
  for (size_t i = 0; i < state->bos.size(); ++i) {
    const uint64_t offset = in.U64();
    restored.emplace_back(offset, in.I32());
  }
  VF_RETURN_IF_ERROR(in.Done(what));
  std::vector<UniqueFd> owned(state->bos.size());
  for (size_t i = 0; i < restored.size(); ++i) {
    VF_ASSIGN_OR_RETURN(int fd, TakeFd(&reply, restored[i].second, what));
    owned[i].Reset(fd);
  }
  for (size_t i = 0; i < restored.size(); ++i) {
    state->bos[i].restored_offset = restored[i].first;
    state->bos[i].dmabuf_fd = owned[i].valid() ? owned[i].Release() : kKfdNoFd;
  }
  return Status::Ok();
}

Status RemoteKfdOps::Resume(int kfd_fd, pid_t pid) {
  Writer body;
  body.I32(pid);
  const int fds[] = {kfd_fd};
  return backend_->Call(Op::kResume, body, fds).status();
}

}  // namespace

Result<std::unique_ptr<GpuBackend>> ConnectSimGpuBackend(const std::string& socket_path, std::string topology_root,
                                                         SimDeviceOptions device_options) {
  auto backend = std::make_unique<SimGpuBackend>(socket_path, std::move(topology_root), device_options);
  VF_RETURN_IF_ERROR(backend->Connect());
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace vramflow
