// SPDX-License-Identifier: MIT
// The simulated KFD as a service (sim/kfd/sim_kfd_service.h): KFD's CRIU ops,
// files and classification through a GpuBackend in this process and in a
// forked one, with fds crossing the socket; a server that survives broken
// clients; the server's errors arriving intact.
#include "sim/kfd/sim_kfd_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "common/endian.h"
#include "sim/kfd/sim_kfd_wire.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kVa = 0x7f0000000000;
constexpr pid_t kPid = 4242;
constexpr milliseconds kServerIoTimeout{500};  // short, so a stalled client is dropped quickly

// Three BOs with contents on two GPUs and a doorbell (no contents).
std::vector<SimKfdBoSpec> Layout(const std::vector<uint32_t>& gpus) {
  return {
      {kVa, 1 << 20, kKfdBoVram, gpus[0]},
      {kVa + 0x200000, 64 << 10, kKfdBoGtt, gpus[0]},
      {kVa + 0x400000, 8 << 10, kKfdBoDoorbell, gpus[0]},
      {kVa, (256 << 10) + 100, kKfdBoVram, gpus[1]},
  };
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7919 + (i >> 12)) & 0xff);
  return v;
}

// Page-aligned host memory for SimDevice staging.
struct Staging {
  explicit Staging(size_t n)
      : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~Staging() { std::free(data); }
  size_t size;
  uint8_t* data;
};

// Copies a whole BO (a dma-buf fd) from or to `bytes` with a DMA device, as
// the plugin moves contents.
Status CopyBo(Device& device, int dmabuf_fd, DmaDirection direction, std::vector<uint8_t>* bytes) {
  VF_ASSIGN_OR_RETURN(uint32_t bo, device.ImportBo(dmabuf_fd, bytes->size()));
  Staging staging(bytes->size());
  if (direction == DmaDirection::kHostToDevice) std::memcpy(staging.data, bytes->data(), bytes->size());
  VF_ASSIGN_OR_RETURN(uint32_t handle, device.RegisterStaging(staging.data, staging.size));
  VF_ASSIGN_OR_RETURN(DmaFence fence, device.SubmitCopy(0, direction, bo, 0, handle, 0, bytes->size()));
  VF_RETURN_IF_ERROR(device.WaitFence(fence, milliseconds(5000)));
  if (direction == DmaDirection::kDeviceToHost) std::memcpy(bytes->data(), staging.data, bytes->size());
  VF_RETURN_IF_ERROR(device.UnregisterStaging(handle));
  return device.ReleaseBo(bo);
}

void CloseDmabufs(KfdCheckpoint* state) {
  for (KfdBo& bo : state->bos) {
    if (bo.dmabuf_fd != kKfdNoFd) ::close(bo.dmabuf_fd);
    bo.dmabuf_fd = kKfdNoFd;
  }
}

// A machine served on a socket, its sysfs topology written for clients.
class SimKfdServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kfd_.WriteSysfsTopology(topology_root()).ok());
    auto server = SimKfdServer::Start(&kfd_, socket_path(), kServerIoTimeout);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::string socket_path() const { return dir_.File("kfd.sock"); }
  std::string topology_root() const { return dir_.File("topology"); }

  std::unique_ptr<GpuBackend> Connect() {
    auto backend = ConnectSimGpuBackend(socket_path(), topology_root());
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    return backend.ok() ? std::move(backend).value() : nullptr;
  }

  // A raw connection, to misbehave on.
  UniqueFd RawConnect() {
    Endpoint endpoint;
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.path = socket_path();
    endpoint.uri = "unix:" + socket_path();
    auto fd = ConnectStream(endpoint, SocketOptions{});
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    return fd.ok() ? std::move(fd).value() : UniqueFd();
  }

  // Puts the process of Layout() on the machine with a pattern in each BO that has contents.
  void AddFilledProcess(pid_t pid) {
    ASSERT_TRUE(kfd_.AddProcess(pid, Layout(kfd_.GpuIds())).ok());
    auto bos = kfd_.Bos(pid);
    ASSERT_TRUE(bos.ok());
    for (size_t i = 0; i < bos->size(); ++i) {
      if (!KfdBoHasContents((*bos)[i].alloc_flags)) continue;
      auto bytes = kfd_.BoBytes(pid, i);
      ASSERT_TRUE(bytes.ok());
      std::vector<uint8_t> p = Pattern(bytes->size(), static_cast<uint32_t>(i + 1));
      std::memcpy(bytes->data(), p.data(), p.size());
    }
  }

  testing::TempDir dir_;
  SimKfd kfd_;
  std::unique_ptr<SimKfdServer> server_;
};

// True when the server closed `fd` (EOF) within `timeout`.
bool ClosedWithin(int fd, milliseconds timeout) {
  auto end = Clock::now() + timeout;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int wait = static_cast<int>(std::chrono::duration_cast<milliseconds>(end - Clock::now()).count());
    if (wait < 0 || ::poll(&p, 1, wait) <= 0) return false;
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n > 0) return false;  // it answered
  }
}

//! ProcessInfo -> Checkpoint -> (contents read through the returned dma-bufs with a DMA device) ->
//! Unpause, all through the service; the KFD fd goes over as an fd, the dma-bufs come back as fds.
TEST_F(SimKfdServiceTest, DumpSequence) {
  AddFilledProcess(kPid);
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto target_kfd = kfd_.OpenKfd(kPid);  // the target's KFD file, as CRIU drains it to the dumper
  ASSERT_TRUE(target_kfd.ok());
  KfdOps& ops = backend->Kfd();

  uint32_t major = 0, minor = 0;
  ASSERT_TRUE(ops.GetVersion(&major, &minor).ok());
  EXPECT_EQ(major, 1u);
  EXPECT_EQ(minor, 16u);

  auto info = ops.ProcessInfo(target_kfd->get(), kPid);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->num_devices, 2u);
  EXPECT_EQ(info->num_bos, 4u);
  EXPECT_EQ(*kfd_.ProcessState(kPid), SimKfdProcessState::kPaused);

  auto state = ops.Checkpoint(target_kfd->get(), *info);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->bos.size(), 4u);
  ASSERT_EQ(state->devices.size(), 2u);
  EXPECT_EQ(state->priv_data.size(), info->priv_data_size);
  EXPECT_EQ(state->num_objects, info->num_objects);
  auto machine_bos = kfd_.Bos(kPid);
  ASSERT_TRUE(machine_bos.ok());

  auto topology = backend->LocalTopology();
  ASSERT_TRUE(topology.ok()) << topology.status().ToString();
  ASSERT_EQ(topology->gpus().size(), 2u);
  for (size_t i = 0; i < state->bos.size(); ++i) {
    const KfdBo& bo = state->bos[i];
    EXPECT_EQ(bo.addr, (*machine_bos)[i].addr);
    EXPECT_EQ(bo.offset, (*machine_bos)[i].offset);
    if (!KfdBoHasContents(bo.alloc_flags)) {
      EXPECT_EQ(bo.dmabuf_fd, kKfdNoFd);
      continue;
    }
    ASSERT_NE(bo.dmabuf_fd, kKfdNoFd) << i;
    const KfdNode* gpu = topology->FindGpu(bo.gpu_id);
    ASSERT_NE(gpu, nullptr);
    auto device = backend->OpenDevice(*gpu);
    ASSERT_TRUE(device.ok());
    std::vector<uint8_t> bytes(bo.size);
    Status copied = CopyBo(**device, bo.dmabuf_fd, DmaDirection::kDeviceToHost, &bytes);
    ASSERT_TRUE(copied.ok()) << copied.ToString();
    EXPECT_EQ(bytes, Pattern(bo.size, static_cast<uint32_t>(i + 1))) << "BO " << i;
  }
  CloseDmabufs(&*state);

  ASSERT_TRUE(ops.Unpause(target_kfd->get()).ok());
  EXPECT_EQ(*kfd_.ProcessState(kPid), SimKfdProcessState::kRunning);
  EXPECT_EQ(kfd_.CallLog(), (std::vector<std::string>{"GetVersion", "ProcessInfo", "Checkpoint", "Unpause"}));
}

//! More dma-bufs than one message carries (kMaxFdsPerMessage) arrive in batches, each fd on its own BO.
TEST_F(SimKfdServiceTest, CheckpointWithManyBosBatchesFds) {
  const uint32_t gpu = kfd_.GpuIds()[0];
  std::vector<SimKfdBoSpec> bos;
  const size_t count = kMaxFdsPerMessage + 60;
  for (size_t i = 0; i < count; ++i) bos.push_back({kVa + i * 0x10000, 4096, kKfdBoGtt, gpu});
  ASSERT_TRUE(kfd_.AddProcess(kPid, bos).ok());
  for (size_t i = 0; i < count; ++i) {
    auto bytes = kfd_.BoBytes(kPid, i);
    ASSERT_TRUE(bytes.ok());
    StoreLE32(bytes->data(), static_cast<uint32_t>(i) ^ 0x5a5a0000);
  }
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto target_kfd = kfd_.OpenKfd(kPid);
  ASSERT_TRUE(target_kfd.ok());
  auto info = backend->Kfd().ProcessInfo(target_kfd->get(), 0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto state = backend->Kfd().Checkpoint(target_kfd->get(), *info);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->bos.size(), count);
  for (size_t i = 0; i < count; ++i) {
    uint8_t word[4];
    ASSERT_EQ(::pread(state->bos[i].dmabuf_fd, word, 4, 0), 4) << i;
    EXPECT_EQ(LoadLE32(word), static_cast<uint32_t>(i) ^ 0x5a5a0000) << i;
  }
  CloseDmabufs(&*state);
  EXPECT_TRUE(backend->Kfd().Unpause(target_kfd->get()).ok());
}

// What a forked child reports when it fails (else the restored offsets).
void ChildFail(int report, const std::string& message) {
  (void)!::write(report, message.data(), message.size());
  ::_exit(1);
}

// The restore half, as a restored task runs it: its own KFD file, render
// nodes, Restore, then the contents written through the new dma-bufs.
void RestoreInChild(GpuBackend& backend, KfdCheckpoint state, const std::vector<std::vector<uint8_t>>& contents,
                    int report) {
  auto kfd_fd = backend.OpenKfd();
  if (!kfd_fd.ok()) ChildFail(report, "OpenKfd: " + kfd_fd.status().ToString());
  auto topology = backend.LocalTopology();
  if (!topology.ok()) ChildFail(report, "LocalTopology: " + topology.status().ToString());
  std::vector<UniqueFd> drm_fds;
  for (KfdDevice& d : state.devices) {
    const KfdNode* gpu = topology->FindGpu(d.actual_gpu_id);
    if (gpu == nullptr) ChildFail(report, "no GPU in topology");
    auto drm = backend.OpenRenderNode(*gpu);
    if (!drm.ok()) ChildFail(report, "OpenRenderNode: " + drm.status().ToString());
    d.drm_fd = drm->get();
    drm_fds.push_back(std::move(drm).value());
  }
  Status restored = backend.Kfd().Restore(kfd_fd->get(), &state);
  if (!restored.ok()) ChildFail(report, "Restore: " + restored.ToString());
  // pwrite rather than a SimDevice: no threads in a child of a threaded
  // process (ThreadSanitizer cannot follow them); the dump test copies with one.
  for (size_t i = 0; i < state.bos.size(); ++i) {
    const KfdBo& bo = state.bos[i];
    if (!KfdBoHasContents(bo.alloc_flags)) continue;
    if (bo.dmabuf_fd == kKfdNoFd) ChildFail(report, "no dma-buf for BO " + std::to_string(i));
    for (size_t done = 0; done < contents[i].size();) {
      ssize_t n = ::pwrite(bo.dmabuf_fd, contents[i].data() + done, contents[i].size() - done, done);
      if (n <= 0) ChildFail(report, "writing BO " + std::to_string(i) + ": " + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
  CloseDmabufs(&state);
  std::string offsets;  // the restored mmap offsets, for the parent to check
  for (const KfdBo& bo : state.bos) offsets += std::to_string(bo.restored_offset) + " ";
  (void)!::write(report, offsets.data(), offsets.size());
  ::_exit(0);
}

//! A forked child (which inherited the parent's connected backend and must open its own
//! connection) restores a checkpoint: its KFD file, render nodes as drm fds, Restore, contents
//! through the returned dma-bufs. The parent, owning the SimKfd, then sees the child's pid restored
//! with the right contents, and Resumes it through its own, still working, connection.
TEST_F(SimKfdServiceTest, RestoreInForkedChild) {
  AddFilledProcess(kPid);
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto target_kfd = kfd_.OpenKfd(kPid);
  ASSERT_TRUE(target_kfd.ok());
  auto info = backend->Kfd().ProcessInfo(target_kfd->get(), kPid);
  ASSERT_TRUE(info.ok());
  auto image = backend->Kfd().Checkpoint(target_kfd->get(), *info);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  std::vector<std::vector<uint8_t>> contents(image->bos.size());
  for (size_t i = 0; i < image->bos.size(); ++i) {
    if (KfdBoHasContents(image->bos[i].alloc_flags)) contents[i] = Pattern(image->bos[i].size, 1000 + i);
  }
  CloseDmabufs(&*image);
  ASSERT_TRUE(backend->Kfd().Unpause(target_kfd->get()).ok());

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd report_read(pipe_fds[0]), report_write(pipe_fds[1]);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);  // never outlive a stuck test
    RestoreInChild(*backend, *image, contents, report_write.get());
  }
  report_write.Reset();
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(report_read.get(), buf, sizeof(buf))) > 0;) report.append(buf, n);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "child: " << report << " status " << wstatus;
  // The child connects on its own, once per call: a forked process (a task
  // CRIU restores) keeps no fd of the simulated KFD's between calls.
  EXPECT_GT(server_->connections_accepted(), 2u) << "the child must not talk on the parent's connection";

  std::vector<uint64_t> child_offsets;
  std::istringstream offsets(report);
  for (uint64_t v; offsets >> v;) child_offsets.push_back(v);
  ASSERT_EQ(child_offsets.size(), image->bos.size()) << report;
  ASSERT_TRUE(kfd_.HasProcess(child));
  EXPECT_EQ(*kfd_.ProcessState(child), SimKfdProcessState::kRestored);
  auto restored = kfd_.Bos(child);
  ASSERT_TRUE(restored.ok());
  ASSERT_EQ(restored->size(), image->bos.size());
  for (size_t i = 0; i < restored->size(); ++i) {
    EXPECT_EQ((*restored)[i].addr, image->bos[i].addr);
    EXPECT_EQ(child_offsets[i], (*restored)[i].offset) << "the child's restored_offset of BO " << i;
    if (!KfdBoHasContents((*restored)[i].alloc_flags)) continue;
    EXPECT_NE((*restored)[i].offset, image->bos[i].offset) << "new mmap offsets on restore";
    auto bytes = kfd_.BoBytes(child, i);
    ASSERT_TRUE(bytes.ok());
    EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), contents[i].begin(), contents[i].end())) << "BO " << i;
  }

  // The main CRIU process resumes it, on a KFD file of its own.
  auto own_kfd = backend->OpenKfd();
  ASSERT_TRUE(own_kfd.ok()) << own_kfd.status().ToString();
  Status resumed = backend->Kfd().Resume(own_kfd->get(), child);
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  EXPECT_EQ(*kfd_.ProcessState(child), SimKfdProcessState::kRunning);
}

//! Classify asks the server by st_dev/st_ino: KFD files (and dups of them), render nodes, and
//! anything else.
TEST_F(SimKfdServiceTest, Classify) {
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto kfd_fd = backend->OpenKfd();
  ASSERT_TRUE(kfd_fd.ok()) << kfd_fd.status().ToString();
  auto topology = backend->LocalTopology();
  ASSERT_TRUE(topology.ok());
  const KfdNode& gpu = *topology->gpus()[1];
  auto render = backend->OpenRenderNode(gpu);
  ASSERT_TRUE(render.ok()) << render.status().ToString();
  EXPECT_EQ(*kfd_.RenderNodeGpu(render->get()), gpu.gpu_id);
  EXPECT_EQ(backend->RenderNodePath(gpu), "/dev/dri/renderD129");

  auto kind_of = [&](int fd) {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    auto kind = backend->Classify(st);
    EXPECT_TRUE(kind.ok()) << kind.status().ToString();
    return kind.ok() ? *kind : GpuFileKind::kNone;
  };
  EXPECT_EQ(kind_of(kfd_fd->get()), GpuFileKind::kKfd);
  UniqueFd dup(::dup(kfd_fd->get()));
  EXPECT_EQ(kind_of(dup.get()), GpuFileKind::kKfd);
  EXPECT_EQ(kind_of(render->get()), GpuFileKind::kRenderNode);
  testing::WriteFileBytes(dir_.File("other"), {1, 2, 3});
  UniqueFd other(::open(dir_.File("other").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(kind_of(other.get()), GpuFileKind::kNone);

  // OpenKfd gave a KFD file of this process: ProcessInfo on it names our pid.
  ASSERT_TRUE(kfd_.AddProcess(::getpid(), {}).ok());
  EXPECT_TRUE(backend->Kfd().ProcessInfo(kfd_fd->get(), ::getpid()).ok());
}

//! Clients that break the protocol (unknown op, oversized body, fds missing, a half header then a
//! hang-up, a stall mid-request) lose their connection; a body that does not fit its op gets an
//! error reply; all the while the server keeps answering a well-behaved client.
TEST_F(SimKfdServiceTest, ServerSurvivesGarbageClients) {
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto send_header = [](int fd, uint32_t op, uint32_t num_fds, uint32_t body_len) {
    uint8_t header[sim_wire::kRequestHeaderBytes];
    StoreLE32(header, op);
    StoreLE32(header + 4, num_fds);
    StoreLE32(header + 8, body_len);
    return ::send(fd, header, sizeof(header), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(header));
  };
  const milliseconds kSoon(2000);

  UniqueFd unknown_op = RawConnect();
  ASSERT_TRUE(send_header(unknown_op.get(), 999, 0, 0));
  EXPECT_TRUE(ClosedWithin(unknown_op.get(), kSoon));

  UniqueFd huge = RawConnect();
  ASSERT_TRUE(send_header(huge.get(), static_cast<uint32_t>(sim_wire::Op::kGetVersion), 0, 1u << 31));
  EXPECT_TRUE(ClosedWithin(huge.get(), kSoon));

  UniqueFd missing_fds = RawConnect();
  ASSERT_TRUE(send_header(missing_fds.get(), static_cast<uint32_t>(sim_wire::Op::kUnpause), 1, 0));
  EXPECT_TRUE(ClosedWithin(missing_fds.get(), kSoon));

  UniqueFd half = RawConnect();
  ASSERT_EQ(::send(half.get(), "\x01\x00", 2, MSG_NOSIGNAL), 2);
  half.Reset();  // hangs up mid-request

  UniqueFd stalled = RawConnect();
  ASSERT_EQ(::send(stalled.get(), "\x01\x00\x00", 3, MSG_NOSIGNAL), 3);
  auto stall_start = Clock::now();
  // While that connection waits out its timeout, others are served.
  uint32_t major = 0, minor = 0;
  ASSERT_TRUE(backend->Kfd().GetVersion(&major, &minor).ok());
  EXPECT_LT(Clock::now() - stall_start, kServerIoTimeout);
  EXPECT_TRUE(ClosedWithin(stalled.get(), kServerIoTimeout + kSoon));
  EXPECT_GE(Clock::now() - stall_start, kServerIoTimeout - milliseconds(50));

  // Framing intact but the body wrong for the op: an error reply, and the connection stays.
  UniqueFd wrong_body = RawConnect();
  const uint8_t three[] = {1, 2, 3};
  ASSERT_TRUE(sim_wire::SendRequest(wrong_body.get(), sim_wire::Op::kProcessInfo, three, {}, kSoon).ok());
  auto reply = sim_wire::RecvReply(wrong_body.get(), kSoon);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status.code(), Status::Code::kCorruption) << reply->status.ToString();
  ASSERT_TRUE(sim_wire::SendRequest(wrong_body.get(), sim_wire::Op::kGetVersion, {}, {}, kSoon).ok());
  reply = sim_wire::RecvReply(wrong_body.get(), kSoon);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->status.ok()) << reply->status.ToString();
  EXPECT_EQ(reply->body.size(), 8u);

  EXPECT_TRUE(backend->Kfd().GetVersion(&major, &minor).ok());
  EXPECT_EQ(major, 1u);
}

//! The server's error (code and message) comes back to the caller as SimKfd produced it: an op out
//! of order, a file that is no KFD file, an injected fault, an unknown GPU.
TEST_F(SimKfdServiceTest, ErrorsCarryTheServersStatus) {
  AddFilledProcess(kPid);
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto target_kfd = kfd_.OpenKfd(kPid);
  ASSERT_TRUE(target_kfd.ok());

  Status remote = backend->Kfd().Unpause(target_kfd->get());
  Status local = kfd_.Ops()->Unpause(target_kfd->get());
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.code(), Status::Code::kIoError);
  EXPECT_EQ(remote.ToString(), local.ToString());
  EXPECT_NE(remote.message().find("simulated KFD Unpause: process 4242 is not paused"), std::string::npos)
      << remote.message();

  testing::WriteFileBytes(dir_.File("plain"), {0});
  UniqueFd plain(::open(dir_.File("plain").c_str(), O_RDONLY | O_CLOEXEC));
  auto not_kfd = backend->Kfd().ProcessInfo(plain.get(), kPid);
  ASSERT_FALSE(not_kfd.ok());
  EXPECT_NE(not_kfd.status().message().find("is not a simulated KFD file"), std::string::npos)
      << not_kfd.status().message();

  SimKfdFaults faults;
  faults.fail_op = "ProcessInfo";
  faults.fail_errno = ENOMEM;
  kfd_.SetFaults(faults);
  auto injected = backend->Kfd().ProcessInfo(target_kfd->get(), kPid);
  ASSERT_FALSE(injected.ok());
  EXPECT_NE(injected.status().message().find("injected fault"), std::string::npos) << injected.status().message();
  EXPECT_NE(injected.status().message().find(std::strerror(ENOMEM)), std::string::npos);
  kfd_.SetFaults({});

  KfdNode no_gpu;
  no_gpu.gpu_id = 0xdead;
  auto render = backend->OpenRenderNode(no_gpu);
  ASSERT_FALSE(render.ok());
  EXPECT_NE(render.status().message().find("0xdead"), std::string::npos) << render.status().message();

  // After all those errors the connection still works.
  EXPECT_TRUE(backend->Kfd().ProcessInfo(target_kfd->get(), kPid).ok());
}

//! Calls from several threads share one connection without mixing up replies.
TEST_F(SimKfdServiceTest, ConcurrentCallsOnOneBackend) {
  auto backend = Connect();
  ASSERT_TRUE(backend);
  auto kfd_fd = backend->OpenKfd();
  ASSERT_TRUE(kfd_fd.ok());
  struct stat st {};
  ASSERT_EQ(::fstat(kfd_fd->get(), &st), 0);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (t % 2 == 0) {
          uint32_t major = 0, minor = 0;
          if (!backend->Kfd().GetVersion(&major, &minor).ok() || minor != 16) ++failures;
        } else {
          auto kind = backend->Classify(st);
          if (!kind.ok() || *kind != GpuFileKind::kKfd) ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

//! No server: connecting fails with a clear error; a stopped server removes its socket file and
//! its clients get errors, not hangs.
TEST_F(SimKfdServiceTest, NoServer) {
  auto none = ConnectSimGpuBackend(dir_.File("nobody.sock"), topology_root());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("nobody.sock"), std::string::npos) << none.status().message();

  auto backend = Connect();
  ASSERT_TRUE(backend);
  server_.reset();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
  uint32_t major = 0, minor = 0;
  auto start = Clock::now();
  EXPECT_FALSE(backend->Kfd().GetVersion(&major, &minor).ok());
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

}  // namespace
}  // namespace vramflow
