// SPDX-License-Identifier: MIT
// The parallel-restore channel (plugin/parallel_restore.h): jobs with fds from
// forked "restored tasks" to the server's runner, in order, with every way a
// job can fail reported by Finish and nothing left hanging or leaking.
#include "plugin/parallel_restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/endian.h"
#include "transport/net/fd_passing.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kTimeout{5000};  // generous bound; every test finishes far sooner

int OpenFdCount() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
  ::closedir(dir);
  return n - 1;  // the directory's own fd
}

std::vector<uint8_t> Contents(uint32_t gpu, uint32_t bo, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<uint8_t>(gpu * 71 + bo * 13 + i * 7 + (i >> 10));
  return v;
}

std::string MemfdName(uint32_t gpu, uint32_t bo) { return "vf-bo-" + std::to_string(gpu) + "-" + std::to_string(bo); }

// A memfd named MemfdName(gpu, bo) holding Contents(gpu, bo, size).
UniqueFd MakeMemfd(uint32_t gpu, uint32_t bo, size_t size) {
  UniqueFd fd(::memfd_create(MemfdName(gpu, bo).c_str(), MFD_CLOEXEC));
  std::vector<uint8_t> bytes = Contents(gpu, bo, size);
  if (fd.valid() && !bytes.empty() && ::write(fd.get(), bytes.data(), bytes.size()) != ssize_t(bytes.size()))
    fd.Reset();
  return fd;
}

// A job of `bos_per_gpu.size()` GPUs (image gpu_id 0x1000+g, target 0x2000+g)
// whose BOs are memfds of `bo_size` bytes.
ParallelRestoreJob MakeJob(int32_t image_id, std::vector<uint32_t> bos_per_gpu, size_t bo_size) {
  ParallelRestoreJob job;
  job.image_id = image_id;
  job.pid = static_cast<int32_t>(::getpid());
  for (uint32_t g = 0; g < bos_per_gpu.size(); ++g) {
    ParallelRestoreGpu gpu;
    gpu.image_gpu_id = 0x1000 + g;
    gpu.target_gpu_id = 0x2000 + g;
    for (uint32_t b = 0; b < bos_per_gpu[g]; ++b) {
      const size_t size = bo_size + b % 3;  // a few different sizes
      gpu.bos.push_back(ParallelRestoreBo{100 + b, size, MakeMemfd(g, b, size)});
    }
    job.gpus.push_back(std::move(gpu));
  }
  return job;
}

// Checks that `job` is what MakeJob(image_id, bos_per_gpu, bo_size) built,
// reading every BO through its received fd.
void ExpectJob(const ParallelRestoreJob& job, int32_t image_id, std::vector<uint32_t> bos_per_gpu, size_t bo_size) {
  EXPECT_EQ(job.image_id, image_id);
  ASSERT_EQ(job.gpus.size(), bos_per_gpu.size());
  for (uint32_t g = 0; g < bos_per_gpu.size(); ++g) {
    const ParallelRestoreGpu& gpu = job.gpus[g];
    EXPECT_EQ(gpu.image_gpu_id, 0x1000 + g);
    EXPECT_EQ(gpu.target_gpu_id, 0x2000 + g);
    ASSERT_EQ(gpu.bos.size(), bos_per_gpu[g]);
    for (uint32_t b = 0; b < gpu.bos.size(); ++b) {
      const ParallelRestoreBo& bo = gpu.bos[b];
      EXPECT_EQ(bo.index, 100 + b);
      ASSERT_EQ(bo.size, bo_size + b % 3);
      ASSERT_TRUE(bo.dmabuf.valid());
      char link[256] = {};
      const std::string proc = "/proc/self/fd/" + std::to_string(bo.dmabuf.get());
      ASSERT_GT(::readlink(proc.c_str(), link, sizeof(link) - 1), 0);
      EXPECT_EQ(std::string(link), "/memfd:" + MemfdName(g, b) + " (deleted)");
      std::vector<uint8_t> read(bo.size);
      ASSERT_EQ(::pread(bo.dmabuf.get(), read.data(), read.size(), 0), ssize_t(read.size()));
      EXPECT_EQ(read, Contents(g, b, bo.size)) << "GPU " << g << " BO " << b;
    }
  }
}

// A forked process that waits for Go() before running `body`; its exit
// status is body's result. Forked before the server's threads exist.
class Child {
 public:
  explicit Child(std::function<int()> body) {
    int go[2];
    if (::pipe2(go, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(90);  // the test went away
      ::_exit(body());
    }
    ::close(go[0]);
    go_.Reset(go[1]);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void Go() { ASSERT_EQ(::write(go_.get(), "g", 1), 1); }
  // The exit code, or -1 if it did not exit within `timeout` (then it is killed).
  int Wait(milliseconds timeout = kTimeout) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (Clock::now() >= end) return -1;
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

 private:
  pid_t pid_ = -1;
  UniqueFd go_;
  bool reaped_ = false;
};

// Sends MakeJob(image_id, ...) from the calling (child) process: 0 on success.
int SendJobFromChild(const std::string& name, int32_t image_id, std::vector<uint32_t> bos_per_gpu, size_t bo_size) {
  ParallelRestoreJob job = MakeJob(image_id, bos_per_gpu, bo_size);
  Status s = SendParallelRestoreJob(name, job, kTimeout);
  if (!s.ok()) std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

// The runner of most tests: keeps every job it gets, in order.
struct Collector {
  std::mutex mu;
  std::vector<ParallelRestoreJob> jobs;
  bool signals_blocked = true;
  ParallelRestoreRunner Runner() {
    return [this](ParallelRestoreJob job) {
      sigset_t mask;
      pthread_sigmask(SIG_BLOCK, nullptr, &mask);
      std::lock_guard<std::mutex> lock(mu);
      signals_blocked &= sigismember(&mask, SIGCHLD) == 1 && sigismember(&mask, SIGTERM) == 1;
      jobs.push_back(std::move(job));
      return Status::Ok();
    };
  }
};

std::unique_ptr<ParallelRestoreServer> ListenOrDie(milliseconds io_timeout = ParallelRestoreServer::kDefaultIoTimeout) {
  auto server = ParallelRestoreServer::Listen(UniqueParallelRestoreName(), io_timeout);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

// A raw client for hand-made (broken) messages, per the format in parallel_restore.cc.
UniqueFd RawConnect(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) fd.Reset();
  return fd;
}

std::vector<uint8_t> RawHeader(uint32_t magic, uint16_t command, int32_t image_id, int32_t pid, uint32_t gpus,
                               uint32_t bos) {
  std::vector<uint8_t> h(24);
  StoreLE32(&h[0], magic);
  StoreLE16(&h[4], 1);
  StoreLE16(&h[6], command);
  StoreLE32(&h[8], static_cast<uint32_t>(image_id));
  StoreLE32(&h[12], static_cast<uint32_t>(pid));
  StoreLE32(&h[16], gpus);
  StoreLE32(&h[20], bos);
  return h;
}
constexpr uint32_t kMagic = 0x52504656;

void Append(std::vector<uint8_t>* v, uint32_t a, uint32_t b, uint32_t c) {
  size_t at = v->size();
  v->resize(at + 12);
  StoreLE32(&(*v)[at], a);
  StoreLE32(&(*v)[at + 4], b);
  StoreLE32(&(*v)[at + 8], c);
}

void AppendBo(std::vector<uint8_t>* v, uint32_t index, uint64_t size) {
  size_t at = v->size();
  v->resize(at + 16);
  StoreLE32(&(*v)[at], index);
  StoreLE32(&(*v)[at + 4], 0);
  StoreLE64(&(*v)[at + 8], size);
}

bool WriteAll(int fd, const std::vector<uint8_t>& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
}

// Whether the server closed `fd` without answering (as it does on a refused message).
bool ClosedWithoutAck(int fd) {
  uint8_t b[4];
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return ::recv(fd, b, sizeof(b), 0) == 0;
}

//! A job from another process arrives with fds that work there: names and contents of
//! the child's memfds read back through them after the child exited; peer credentials
//! filled in; the runner thread has SIGCHLD (and everything else) blocked.
TEST(ParallelRestoreTest, JobFromChildArrivesWithWorkingFds) {
  const int fds_before = OpenFdCount();
  {
    auto server = ListenOrDie();
    ASSERT_NE(server, nullptr);
    const std::string name = server->name();
    Child child([&] { return SendJobFromChild(name, 7, {3, 2}, 70000); });
    Collector collector;
    ASSERT_TRUE(server->Start(collector.Runner()).ok());
    child.Go();
    ASSERT_EQ(child.Wait(), 0);
    Status finished = server->Finish(kTimeout);
    ASSERT_TRUE(finished.ok()) << finished.ToString();
    ASSERT_EQ(collector.jobs.size(), 1u);
    ExpectJob(collector.jobs[0], 7, {3, 2}, 70000);
    EXPECT_EQ(collector.jobs[0].pid, child.pid());  // MakeJob puts the sender's own pid
    EXPECT_EQ(collector.jobs[0].peer_pid, child.pid());
    EXPECT_EQ(collector.jobs[0].peer_uid, ::getuid());
    EXPECT_TRUE(collector.signals_blocked);
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
}

//! Jobs from several tasks run one after another in the order they were sent, and a
//! task's send does not wait for an earlier job to finish running.
TEST(ParallelRestoreTest, JobsFromSeveralChildrenRunInOrder) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  const std::string name = server->name();
  std::vector<std::unique_ptr<Child>> children;
  for (int32_t id = 1; id <= 3; ++id)
    children.push_back(std::make_unique<Child>([&name, id] { return SendJobFromChild(name, id, {2}, 4096); }));

  std::mutex mu;
  std::condition_variable cv;
  bool release_first = false;
  std::vector<int32_t> order;
  ASSERT_TRUE(server
                  ->Start([&](ParallelRestoreJob job) {
                    std::unique_lock<std::mutex> lock(mu);
                    if (job.image_id == 1) cv.wait_for(lock, kTimeout, [&] { return release_first; });
                    order.push_back(job.image_id);
                    ExpectJob(job, job.image_id, {2}, 4096);
                    return Status::Ok();
                  })
                  .ok());
  // Job 1 runs (and blocks) while 2 and 3 are sent and acknowledged.
  for (auto& child : children) {
    child->Go();
    ASSERT_EQ(child->Wait(), 0);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty());
    release_first = true;
  }
  cv.notify_all();
  Status finished = server->Finish(kTimeout);
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  EXPECT_EQ(order, (std::vector<int32_t>{1, 2, 3}));
}

//! One job with more BOs than one SCM_RIGHTS message carries (two full batches and a
//! partial one) arrives whole and in order; every received fd is closed afterwards.
TEST(ParallelRestoreTest, MoreFdsThanOneMessageCarries) {
  const uint32_t kBos = 2 * kMaxFdsPerMessage + 20;
  const int fds_before = OpenFdCount();
  {
    auto server = ListenOrDie();
    ASSERT_NE(server, nullptr);
    const std::string name = server->name();
    Child child([&] { return SendJobFromChild(name, 11, {kBos, 1}, 8); });
    Collector collector;
    ASSERT_TRUE(server->Start(collector.Runner()).ok());
    child.Go();
    ASSERT_EQ(child.Wait(), 0);
    ASSERT_TRUE(server->Finish(kTimeout).ok());
    ASSERT_EQ(collector.jobs.size(), 1u);
    ExpectJob(collector.jobs[0], 11, {kBos, 1}, 8);
    EXPECT_GE(OpenFdCount(), fds_before + int(kBos) + 1);
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
}

//! The runner's error comes out of Finish with the image id and pid; jobs after it are
//! still acknowledged (no task waits) but not run; Finish is idempotent.
TEST(ParallelRestoreTest, RunnerErrorComesOutOfFinishWithContext) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  std::atomic<int> runs{0};
  ASSERT_TRUE(server
                  ->Start([&](ParallelRestoreJob job) {
                    ++runs;
                    return Status::IoError("SDMA write of BO 3 failed");
                  })
                  .ok());
  ParallelRestoreJob first = MakeJob(42, {1}, 16);
  first.pid = 4242;
  ASSERT_TRUE(SendParallelRestoreJob(server->name(), first, kTimeout).ok());
  ParallelRestoreJob second = MakeJob(43, {1}, 16);
  ASSERT_TRUE(SendParallelRestoreJob(server->name(), second, kTimeout).ok());
  Status finished = server->Finish(kTimeout);
  EXPECT_EQ(finished.code(), Status::Code::kIoError);
  EXPECT_NE(finished.message().find("image 42 (pid 4242)"), std::string::npos) << finished.ToString();
  EXPECT_NE(finished.message().find("SDMA write of BO 3 failed"), std::string::npos) << finished.ToString();
  EXPECT_EQ(runs.load(), 1);
  Status again = server->Finish(kTimeout);
  EXPECT_EQ(again.ToString(), finished.ToString());
}

//! Finish with no job at all is OK, quick and idempotent; afterwards the socket is
//! gone, so a late sender fails at once instead of waiting.
TEST(ParallelRestoreTest, FinishWithNoJobs) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  Collector collector;
  ASSERT_TRUE(server->Start(collector.Runner()).ok());
  const auto start = Clock::now();
  EXPECT_TRUE(server->Finish(kTimeout).ok());
  EXPECT_TRUE(server->Finish(kTimeout).ok());
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  ParallelRestoreJob late = MakeJob(5, {1}, 16);
  Status sent = SendParallelRestoreJob(server->name(), late, kTimeout);
  EXPECT_FALSE(sent.ok());
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_TRUE(collector.jobs.empty());
}

//! Finish before Start is a caller bug, reported; so is a second Start.
TEST(ParallelRestoreTest, MisuseIsReported) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Finish(kTimeout).code(), Status::Code::kInternal);
  auto other = ListenOrDie();
  ASSERT_NE(other, nullptr);
  Collector collector;
  ASSERT_TRUE(other->Start(collector.Runner()).ok());
  EXPECT_EQ(other->Start(collector.Runner()).code(), Status::Code::kInternal);
  EXPECT_TRUE(other->Finish(kTimeout).ok());
}

// A child that sends `bytes` (and, if fd_batch, one batch of kMaxFdsPerMessage
// memfds after them) and then dies with the connection half-way.
int DieMidSend(const std::string& name, const std::vector<uint8_t>& bytes, bool fd_batch) {
  UniqueFd conn = RawConnect(name);
  if (!conn.valid() || !WriteAll(conn.get(), bytes)) return 1;
  if (fd_batch) {
    std::vector<UniqueFd> owned;
    std::vector<int> fds;
    for (uint32_t i = 0; i < kMaxFdsPerMessage; ++i) {
      owned.push_back(MakeMemfd(0, i, 4));
      fds.push_back(owned.back().get());
    }
    uint8_t word[4];
    StoreLE32(word, kMaxFdsPerMessage);
    if (!SendWithFds(conn.get(), word, fds, kTimeout, "child").ok()) return 1;
  }
  ::_exit(0);  // the kernel closes the connection mid-job
}

//! A task that dies while sending its job (in the entries, or between fd batches) is an
//! error that Finish reports with the job's image id, not a hang; fds that did arrive
//! are closed; later jobs are still acknowledged.
TEST(ParallelRestoreTest, ChildDyingMidSendIsAnError) {
  const int fds_before = OpenFdCount();
  for (bool in_fds : {false, true}) {
    SCOPED_TRACE(in_fds ? "dies between fd batches" : "dies in the BO entries");
    auto server = ListenOrDie();
    ASSERT_NE(server, nullptr);
    const std::string name = server->name();
    // One GPU with 300 BOs announced; the child sends the header, the GPU entry and
    // either 1 BO entry or all 300 plus the first batch of fds.
    std::vector<uint8_t> bytes = RawHeader(kMagic, 1, 9, 99, 1, 300);
    Append(&bytes, 0x1000, 0x2000, 300);
    for (uint32_t i = 0; i < (in_fds ? 300u : 1u); ++i) AppendBo(&bytes, i, 4);
    Child child([&] { return DieMidSend(name, bytes, in_fds); });
    Collector collector;
    ASSERT_TRUE(server->Start(collector.Runner()).ok());
    child.Go();
    ASSERT_EQ(child.Wait(), 0);
    ParallelRestoreJob later = MakeJob(10, {1}, 16);
    EXPECT_TRUE(SendParallelRestoreJob(name, later, kTimeout).ok());
    const auto start = Clock::now();
    Status finished = server->Finish(kTimeout);
    EXPECT_LT(Clock::now() - start, milliseconds(1000));
    EXPECT_EQ(finished.code(), Status::Code::kTruncated) << finished.ToString();
    EXPECT_NE(finished.message().find("image 9 (pid 99)"), std::string::npos) << finished.ToString();
    EXPECT_TRUE(collector.jobs.empty());
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
}

//! A message that is not ours, or announces absurd counts, is refused before anything
//! is allocated for it: Finish reports a corruption, the sender sees the connection close.
TEST(ParallelRestoreTest, HostileHeadersAreRefused) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* message;
  };
  std::vector<uint8_t> sum_mismatch = RawHeader(kMagic, 1, 3, 33, 1, 2);
  Append(&sum_mismatch, 1, 2, 3);
  const Case cases[] = {
      {"bad magic", RawHeader(0x12345678, 1, 3, 33, 1, 1), "magic 0x12345678"},
      {"unknown command", RawHeader(kMagic, 7, 3, 33, 1, 1), "unknown command 7"},
      {"4 billion BOs", RawHeader(kMagic, 1, 3, 33, 1, 0xFFFFFFFF), "4294967295 BOs"},
      {"65536 GPUs", RawHeader(kMagic, 1, 3, 33, 65536, 1), "65536 GPUs"},
      {"GPU entries that disagree", sum_mismatch, "hold 3 BOs, the header 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto server = ListenOrDie();
    ASSERT_NE(server, nullptr);
    Collector collector;
    ASSERT_TRUE(server->Start(collector.Runner()).ok());
    UniqueFd conn = RawConnect(server->name());
    ASSERT_TRUE(conn.valid());
    ASSERT_TRUE(WriteAll(conn.get(), c.bytes));
    EXPECT_TRUE(ClosedWithoutAck(conn.get()));
    Status finished = server->Finish(kTimeout);
    EXPECT_EQ(finished.code(), Status::Code::kCorruption) << finished.ToString();
    EXPECT_NE(finished.message().find(c.message), std::string::npos) << finished.ToString();
  }
}

//! A task that connects and then sends nothing holds the receiver for io_timeout only:
//! a timeout error, and the quit command behind it is still seen.
TEST(ParallelRestoreTest, StalledSenderTimesOut) {
  auto server = ListenOrDie(milliseconds(200));
  ASSERT_NE(server, nullptr);
  Collector collector;
  ASSERT_TRUE(server->Start(collector.Runner()).ok());
  UniqueFd silent = RawConnect(server->name());
  ASSERT_TRUE(silent.valid());
  const auto start = Clock::now();
  Status finished = server->Finish(kTimeout);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(finished.code(), Status::Code::kTimedOut) << finished.ToString();
  EXPECT_NE(finished.message().find("header"), std::string::npos) << finished.ToString();
}

//! A runner that does not finish in time makes Finish return kTimedOut naming the job,
//! within the timeout, and again on a later call; the server is then destroyed
//! cleanly once the runner returns.
TEST(ParallelRestoreTest, FinishTimesOutWhenARunnerBlocks) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  bool running = false, release = false;
  ASSERT_TRUE(server
                  ->Start([&](ParallelRestoreJob job) {
                    std::unique_lock<std::mutex> lock(mu);
                    running = true;
                    cv.notify_all();
                    cv.wait_for(lock, kTimeout, [&] { return release; });
                    return Status::Ok();
                  })
                  .ok());
  ParallelRestoreJob job = MakeJob(5, {1}, 16);
  job.pid = 555;
  ASSERT_TRUE(SendParallelRestoreJob(server->name(), job, kTimeout).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return running; }));
  }
  const auto start = Clock::now();
  Status finished = server->Finish(milliseconds(200));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(190));
  EXPECT_LT(took, milliseconds(1500));
  EXPECT_EQ(finished.code(), Status::Code::kTimedOut) << finished.ToString();
  EXPECT_NE(finished.message().find("image 5 (pid 555)"), std::string::npos) << finished.ToString();
  EXPECT_EQ(server->Finish(kTimeout).code(), Status::Code::kTimedOut);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  server.reset();  // joins: the runner has returned
}

//! The destructor of a started, never finished server stops its threads at once.
TEST(ParallelRestoreTest, DestroyWithoutFinish) {
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  Collector collector;
  ASSERT_TRUE(server->Start(collector.Runner()).ok());
  const auto start = Clock::now();
  server.reset();
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

//! Sender-side refusals: no listener, a BO without an fd, a name too long, a name taken.
TEST(ParallelRestoreTest, SenderAndListenErrors) {
  ParallelRestoreJob job = MakeJob(1, {1}, 16);
  const auto start = Clock::now();
  Status nobody = SendParallelRestoreJob(UniqueParallelRestoreName(), job, kTimeout);
  EXPECT_EQ(nobody.code(), Status::Code::kIoError) << nobody.ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(1000));

  job.gpus[0].bos.push_back(ParallelRestoreBo{7, 4096, UniqueFd()});
  EXPECT_EQ(SendParallelRestoreJob("x", job, kTimeout).code(), Status::Code::kInvalidArgument);

  EXPECT_EQ(ParallelRestoreServer::Listen(std::string(200, 'n')).status().code(), Status::Code::kInvalidArgument);
  auto server = ListenOrDie();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(ParallelRestoreServer::Listen(server->name()).status().code(), Status::Code::kAlreadyExists);
}

}  // namespace
}  // namespace vramflow
