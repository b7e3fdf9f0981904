// SPDX-License-Identifier: MIT
#include "plugin/parallel_restore.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>
#include <utility>

#include "common/endian.h"
#include "common/thread_start.h"
#include "transport/net/fd_passing.h"
#include "transport/net/socket.h"

// Wire format (version 1). Every integer is little-endian; one connection
// carries one message, from the restored task (client) to the main CRIU
// process (server):
//
//   header, 24 bytes:
//     0  u32 magic      0x52504656 ("VFPR" in byte order)
//     4  u16 version    1
//     6  u16 command    1 = job, 2 = quit (every field below 0)
//     8  i32 image_id   CRIU ext-file id
//    12  i32 pid        the restored task
//    16  u32 gpu_count  at most kParallelRestoreMaxGpus
//    20  u32 bo_count   BOs of all GPUs, at most kParallelRestoreMaxBos
//   gpu_count GPU entries, 12 bytes each:
//     0  u32 image_gpu_id, 4 u32 target_gpu_id, 8 u32 bo_count (they sum to the header's)
//   bo_count BO entries, 16 bytes each, GPU by GPU in the order above:
//     0  u32 index, 4 u32 reserved (0), 8 u64 size
//   ceil(bo_count / kMaxFdsPerMessage) fd batches, each one SCM_RIGHTS
//   message (transport/net/fd_passing.h) of 4 bytes:
//     0  u32 fd_count   kMaxFdsPerMessage, the last one the rest; that many
//                       dma-buf fds ride on it, one per BO entry, in order
//
// Then the server answers a job with one 4-byte word, 0x4B504656 ("VFPK"):
// the whole job, fds included, has arrived, so the client may close its
// copies. A server that refuses a job closes the connection instead (its
// reason is in the main process's error). A quit command gets no answer.
//
// Bounds: the server refuses counts over the limits before reading on, and
// allocates only for entries that actually arrived; every receive gives up
// after io_timeout without progress. Version 1 is the only one: client and
// server are the same plugin, forked.

namespace vramflow {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint32_t kMagic = 0x52504656;     // "VFPR"
constexpr uint32_t kAckMagic = 0x4B504656;  // "VFPK"
constexpr uint16_t kVersion = 1;
enum class Command : uint16_t { kJob = 1, kQuit = 2 };

constexpr size_t kHeaderSize = 4 + 2 + 2 + 4 + 4 + 4 + 4;
constexpr size_t kGpuEntrySize = 4 + 4 + 4;
constexpr size_t kBoEntrySize = 4 + 4 + 8;
constexpr size_t kFdBatchSize = 4;
constexpr size_t kAckSize = 4;
static_assert(kHeaderSize == 24 && kGpuEntrySize == 12 && kBoEntrySize == 16);
// BO entries are read in pieces of this many, so memory follows what arrived.
constexpr size_t kBoEntriesPerRead = 4096;

struct Header {
  Command command = Command::kJob;
  int32_t image_id = 0;
  int32_t pid = 0;
  uint32_t gpu_count = 0;
  uint32_t bo_count = 0;
};

void EncodeHeader(const Header& h, uint8_t* p) {
  StoreLE32(p + 0, kMagic);
  StoreLE16(p + 4, kVersion);
  StoreLE16(p + 6, static_cast<uint16_t>(h.command));
  StoreLE32(p + 8, static_cast<uint32_t>(h.image_id));
  StoreLE32(p + 12, static_cast<uint32_t>(h.pid));
  StoreLE32(p + 16, h.gpu_count);
  StoreLE32(p + 20, h.bo_count);
}

Status DecodeHeader(const uint8_t* p, Header* h) {
  const uint32_t magic = LoadLE32(p + 0);
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    return Status::Corruption(std::string("not a parallel-restore message (magic ") + hex + ")");
  }
  const uint16_t version = LoadLE16(p + 4);
  if (version != kVersion)
    return Status::NotSupported("parallel-restore protocol version " + std::to_string(version) +
                                " (this build speaks " + std::to_string(kVersion) + ")");
  const uint16_t command = LoadLE16(p + 6);
  h->image_id = static_cast<int32_t>(LoadLE32(p + 8));
  h->pid = static_cast<int32_t>(LoadLE32(p + 12));
  h->gpu_count = LoadLE32(p + 16);
  h->bo_count = LoadLE32(p + 20);
  if (command == static_cast<uint16_t>(Command::kQuit)) {
    h->command = Command::kQuit;
    if (h->image_id != 0 || h->pid != 0 || h->gpu_count != 0 || h->bo_count != 0)
      return Status::Corruption("a quit command with non-zero fields");
    return Status::Ok();
  }
  if (command != static_cast<uint16_t>(Command::kJob))
    return Status::Corruption("unknown command " + std::to_string(command));
  h->command = Command::kJob;
  if (h->gpu_count > kParallelRestoreMaxGpus)
    return Status::Corruption(std::to_string(h->gpu_count) + " GPUs (at most " +
                              std::to_string(kParallelRestoreMaxGpus) + ")");
  if (h->bo_count > kParallelRestoreMaxBos)
    return Status::Corruption(std::to_string(h->bo_count) + " BOs (at most " + std::to_string(kParallelRestoreMaxBos) +
                              ")");
  return Status::Ok();
}

std::string Display(const std::string& name) { return "@" + name; }
std::string JobLabel(int32_t image_id, int32_t pid) {
  return "image " + std::to_string(image_id) + " (pid " + std::to_string(pid) + ")";
}

std::string FormatSeconds(milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(t.count()) / 1000.0);
  return text;
}

// A total time limit; a negative timeout never expires.
class Deadline {
 public:
  explicit Deadline(milliseconds timeout)
      : infinite_(timeout.count() < 0),
        end_(Clock::now() + (infinite_ ? kFarAway : std::min<milliseconds>(timeout, kFarAway))) {}
  // What is left, for calls that take a timeout: -1 (forever) or at least 0.
  milliseconds Left() const {
    if (infinite_) return milliseconds(-1);
    return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(end_ - Clock::now()));
  }
  bool Expired() const { return !infinite_ && Clock::now() >= end_; }
  // For wait_until: a year away when infinite (far enough, and no overflow).
  Clock::time_point end() const { return end_; }

 private:
  static constexpr milliseconds kFarAway = std::chrono::hours(24 * 365);
  bool infinite_;
  Clock::time_point end_;
};

// The abstract address `name` (no leading NUL in `name`).
Status AbstractAddress(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  if (name.empty()) return Status::InvalidArgument("parallel restore: empty socket name");
  if (name.find('\0') != std::string::npos)
    return Status::InvalidArgument("parallel restore: socket name '" + name + "' contains a NUL byte");
  if (name.size() + 1 > sizeof(addr->sun_path))
    return Status::InvalidArgument("parallel restore: socket name '" + name + "' is too long (" +
                                   std::to_string(name.size()) + " bytes, at most " +
                                   std::to_string(sizeof(addr->sun_path) - 1) + ")");
  std::memcpy(addr->sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return Status::Ok();
}

// Connects to the abstract socket `name`, retrying while its backlog is full.
Result<UniqueFd> ConnectAbstract(const std::string& name, const Deadline& deadline, const std::string& what) {
  sockaddr_un addr;
  socklen_t len = 0;
  VF_RETURN_IF_ERROR(AbstractAddress(name, &addr, &len));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Status::FromErrno(what + ": socket", errno);
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) return fd;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno(what + ": connecting to " + Display(name), errno);
    if (deadline.Expired()) return Status::TimedOut(what + ": the server's backlog stayed full");
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// ---- Receiving one message (server side) ----

// Reads the GPU entries and BO entries announced by `h` into *job.
Status ReceiveEntries(int conn, const Header& h, milliseconds io_timeout, const std::string& what,
                      ParallelRestoreJob* job) {
  std::vector<uint8_t> buf(h.gpu_count * kGpuEntrySize);
  VF_RETURN_IF_ERROR(RecvAll(conn, buf, io_timeout, what + ": GPU entries"));
  uint64_t announced = 0;
  job->gpus.resize(h.gpu_count);
  for (uint32_t g = 0; g < h.gpu_count; ++g) {
    const uint8_t* p = buf.data() + g * kGpuEntrySize;
    job->gpus[g].image_gpu_id = LoadLE32(p);
    job->gpus[g].target_gpu_id = LoadLE32(p + 4);
    announced += LoadLE32(p + 8);
  }
  if (announced != h.bo_count)
    return Status::Corruption(what + ": the GPU entries hold " + std::to_string(announced) + " BOs, the header " +
                              std::to_string(h.bo_count));

  size_t gpu = 0;
  uint32_t left_in_gpu = h.gpu_count ? LoadLE32(buf.data() + 8) : 0;
  for (uint32_t done = 0; done < h.bo_count;) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kBoEntriesPerRead, h.bo_count - done));
    std::vector<uint8_t> entries(n * kBoEntrySize);
    VF_RETURN_IF_ERROR(RecvAll(conn, entries, io_timeout, what + ": BO entries"));
    for (uint32_t i = 0; i < n; ++i) {
      while (left_in_gpu == 0) left_in_gpu = LoadLE32(buf.data() + (++gpu) * kGpuEntrySize + 8);
      const uint8_t* p = entries.data() + i * kBoEntrySize;
      if (LoadLE32(p + 4) != 0)
        return Status::Corruption(what + ": BO entry " + std::to_string(done + i) + " has reserved bits set");
      ParallelRestoreBo bo;
      bo.index = LoadLE32(p);
      bo.size = LoadLE64(p + 8);
      job->gpus[gpu].bos.push_back(std::move(bo));
      --left_in_gpu;
    }
    done += n;
  }
  return Status::Ok();
}

// Receives the fd batches for the BOs already in *job and hands each BO its fd.
Status ReceiveFds(int conn, uint32_t bo_count, milliseconds io_timeout, const std::string& what,
                  ParallelRestoreJob* job) {
  std::vector<UniqueFd> fds;
  fds.reserve(bo_count);  // bounded: bo_count entries have arrived
  while (fds.size() < bo_count) {
    const size_t expected = std::min<size_t>(kMaxFdsPerMessage, bo_count - fds.size());
    const size_t before = fds.size();
    uint8_t word[kFdBatchSize];
    const std::string batch_what = what + ": fds " + std::to_string(before) + ".." +
                                   std::to_string(before + expected - 1) + " of " + std::to_string(bo_count);
    VF_RETURN_IF_ERROR(RecvWithFds(conn, word, &fds, io_timeout, batch_what));
    const uint32_t stated = LoadLE32(word);
    if (stated != expected || fds.size() - before != expected)
      return Status::Corruption(batch_what + ": the batch says " + std::to_string(stated) + " fds and carried " +
                                std::to_string(fds.size() - before) + ", expected " + std::to_string(expected));
  }
  size_t next = 0;
  for (ParallelRestoreGpu& gpu : job->gpus)
    for (ParallelRestoreBo& bo : gpu.bos) bo.dmabuf = std::move(fds[next++]);
  return Status::Ok();
}

// Reads the one message of connection `conn`: a job into *job, or *quit.
Status ReceiveMessage(int conn, const std::string& server, milliseconds io_timeout, bool* quit,
                      ParallelRestoreJob* job) {
  std::string what = "parallel restore on " + server + ": receiving a job";
  uint8_t head[kHeaderSize];
  VF_RETURN_IF_ERROR(RecvAll(conn, head, io_timeout, what + ": header"));
  Header h;
  Status decoded = DecodeHeader(head, &h);
  if (!decoded.ok()) return decoded.WithContext(what);
  *quit = h.command == Command::kQuit;
  if (*quit) return Status::Ok();

  what = "parallel restore on " + server + ": receiving the job of " + JobLabel(h.image_id, h.pid);
  job->image_id = h.image_id;
  job->pid = h.pid;
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
    return Status::FromErrno(what + ": SO_PEERCRED", errno);
  job->peer_pid = cred.pid;
  job->peer_uid = cred.uid;
  VF_RETURN_IF_ERROR(ReceiveEntries(conn, h, io_timeout, what, job));
  VF_RETURN_IF_ERROR(ReceiveFds(conn, h.bo_count, io_timeout, what, job));
  uint8_t ack[kAckSize];
  StoreLE32(ack, kAckMagic);
  return SendAll(conn, ack, io_timeout, what + ": acknowledging");
}

// Runs the caller's runner; no exception leaves the runner thread.
Status RunGuarded(const ParallelRestoreRunner& run, ParallelRestoreJob job) {
  try {
    return run(std::move(job));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("the runner threw: ") + e.what());
  } catch (...) {
    return Status::Internal("the runner threw a non-standard exception");
  }
}

}  // namespace

// ---- The server ----

struct ParallelRestoreServer::State {
  std::string display;  // "@name"
  milliseconds io_timeout{0};
  UniqueFd listener;  // the receiver thread's once started
  UniqueFd wake;      // eventfd, written once to end the receiver's wait for connections
  ParallelRestoreRunner run;
  std::thread receiver, runner;  // only the owning (CRIU main) thread touches these

  std::mutex mu;
  std::condition_variable cv;
  std::deque<ParallelRestoreJob> queue;  // GUARDED_BY(mu): received, not yet run
  Status first_error;                    // GUARDED_BY(mu)
  std::string running;                   // GUARDED_BY(mu): the job being run, for messages
  int receiving_conn = -1;               // GUARDED_BY(mu): the connection being read; Stop shuts it down
  bool stop = false;                     // GUARDED_BY(mu)
  bool receiver_done = false;            // GUARDED_BY(mu)
  bool runner_done = false;              // GUARDED_BY(mu)

  void RecordErrorLocked(Status s) {
    if (first_error.ok()) first_error = std::move(s);
  }
  bool DoneLocked() const { return receiver_done && runner_done; }

  // Makes both threads end soon: the receiver's accept wait and any receive
  // in progress are interrupted, the runner takes no further job.
  void RequestStop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      if (receiving_conn >= 0) ::shutdown(receiving_conn, SHUT_RDWR);
    }
    const uint64_t one = 1;
    // An eventfd write fails only when the counter would overflow; it is written a few times at most.
    (void)!::write(wake.get(), &one, sizeof(one));
    cv.notify_all();
  }

  // Waits until the next connection arrives: an empty fd when told to stop.
  Result<UniqueFd> AcceptNext() {
    for (;;) {
      pollfd p[2] = {{listener.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("parallel restore on " + display + ": poll", errno);
      }
      if (p[1].revents != 0) return UniqueFd();
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) return UniqueFd(fd);
      // The client went away before we took it, or a spurious wake-up: wait for the next.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
        continue;
      return Status::FromErrno("parallel restore on " + display + ": accepting a connection", errno);
    }
  }

  // The receiver thread: one message per connection, in accept (FIFO) order,
  // until a quit command, a stop request or a failing accept.
  void ReceiveLoop() {
    for (;;) {
      Result<UniqueFd> conn = AcceptNext();
      if (!conn.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        RecordErrorLocked(conn.status());
        break;
      }
      if (!conn->valid()) break;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) break;
        receiving_conn = conn->get();
      }
      bool quit = false;
      ParallelRestoreJob job;
      Status received = ReceiveMessage(conn->get(), display, io_timeout, &quit, &job);
      const bool quitting = received.ok() && quit;
      {
        std::lock_guard<std::mutex> lock(mu);
        receiving_conn = -1;
        conn->Reset();  // under mu, so RequestStop never shuts down a reused fd number
        if (!received.ok()) RecordErrorLocked(std::move(received));
        else if (!quit) queue.push_back(std::move(job));
      }
      cv.notify_all();
      if (quitting) break;
    }
    std::lock_guard<std::mutex> lock(mu);
    listener.Reset();  // later clients are refused at once instead of waiting in the backlog
    receiver_done = true;
    cv.notify_all();
  }

  // The runner thread: the jobs one after another, in arrival order. After
  // the first error, jobs are dropped (fds closed) instead of run.
  void RunLoop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty() || receiver_done; });
      if (stop || queue.empty()) break;  // stopped, or everything received has run
      ParallelRestoreJob job = std::move(queue.front());
      queue.pop_front();
      const std::string label = JobLabel(job.image_id, job.pid);
      const bool skip = !first_error.ok();
      running = label;
      lock.unlock();
      Status ran = skip ? Status::Ok() : RunGuarded(run, std::move(job));
      { ParallelRestoreJob dropped = std::move(job); }  // a skipped job's fds close here, unlocked
      lock.lock();
      running.clear();
      if (!ran.ok()) RecordErrorLocked(ran.WithContext("parallel restore of " + label));
    }
    runner_done = true;
    cv.notify_all();
  }
};

std::string UniqueParallelRestoreName() {
  uint64_t random = 0;
  if (::getrandom(&random, sizeof(random), GRND_NONBLOCK) != sizeof(random)) {
    // No entropy yet (early boot): time and an address still make a clash unlikely.
    random = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ reinterpret_cast<uintptr_t>(&random);
  }
  char text[64];
  std::snprintf(text, sizeof(text), "vramflow-amdgpu-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(random));
  return text;
}

ParallelRestoreServer::ParallelRestoreServer(std::string name, std::shared_ptr<State> state)
    : name_(std::move(name)), state_(std::move(state)) {}

Result<std::unique_ptr<ParallelRestoreServer>> ParallelRestoreServer::Listen(std::string name,
                                                                             milliseconds io_timeout) {
  sockaddr_un addr;
  socklen_t len = 0;
  VF_RETURN_IF_ERROR(AbstractAddress(name, &addr, &len));
  const std::string what = "parallel restore: listening on " + Display(name);
  auto state = std::make_shared<State>();
  state->display = Display(name);
  state->io_timeout = io_timeout;
  state->listener.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!state->listener.valid()) return Status::FromErrno(what + ": socket", errno);
  if (::bind(state->listener.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno == EADDRINUSE) return Status::AlreadyExists(what + ": the name is taken (another CRIU run?)");
    return Status::FromErrno(what, errno);
  }
  if (::listen(state->listener.get(), SOMAXCONN) != 0) return Status::FromErrno(what, errno);
  state->wake.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state->wake.valid()) return Status::FromErrno(what + ": eventfd", errno);
  return std::unique_ptr<ParallelRestoreServer>(new ParallelRestoreServer(std::move(name), std::move(state)));
}

Status ParallelRestoreServer::Start(ParallelRestoreRunner run) {
  const std::string what = "parallel restore on " + state_->display;
  if (started_ || finished_) return Status::Internal(what + ": Start called twice or after Finish");
  if (!run) return Status::InvalidArgument(what + ": no runner");
  state_->run = std::move(run);

  // The threads inherit the mask in force when they are created: block every
  // signal in them, so CRIU's main thread alone gets SIGCHLD and the rest.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  Status started = StartThread(&state_->receiver, what + " (its receiver)", [s = state_] { s->ReceiveLoop(); });
  if (started.ok()) started = StartThread(&state_->runner, what + " (its runner)", [s = state_] { s->RunLoop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!started.ok()) {
    state_->RequestStop();
    if (state_->receiver.joinable()) state_->receiver.join();  // ends at once: stop was requested
    return started;
  }
  started_ = true;
  return Status::Ok();
}

bool ParallelRestoreServer::StopAndJoin(Clock::time_point deadline) {
  state_->RequestStop();
  bool done;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    done = state_->cv.wait_until(lock, deadline, [&] { return state_->DoneLocked(); });
  }
  if (!done) return false;
  state_->receiver.join();
  state_->runner.join();
  return true;
}

Status ParallelRestoreServer::Finish(milliseconds timeout) {
  if (finished_) return result_;
  finished_ = true;
  if (!started_) {
    result_ = Status::Internal("parallel restore on " + state_->display + ": Finish before Start");
    return result_;
  }
  const Deadline deadline(timeout);

  // The quit command queues behind every connection made before it.
  const std::string what = "parallel restore on " + state_->display + ": sending the quit command";
  Status quit = [&]() -> Status {
    VF_ASSIGN_OR_RETURN(UniqueFd conn, ConnectAbstract(name_, deadline, what));
    uint8_t head[kHeaderSize];
    EncodeHeader(Header{Command::kQuit}, head);
    return SendAll(conn.get(), head, deadline.Left(), what);
  }();
  if (!quit.ok()) {
    // Without a quit command the receiver would wait forever: record why, and stop.
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->RecordErrorLocked(std::move(quit));
    }
    state_->RequestStop();
  }

  bool done;
  std::string running;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    done = state_->cv.wait_until(lock, deadline.end(), [&] { return state_->DoneLocked(); });
    running = state_->running;
    if (!state_->first_error.ok()) result_ = state_->first_error;
  }
  if (done) {
    state_->receiver.join();
    state_->runner.join();
    return result_;
  }
  // Out of time. Tell the threads to stop after the job in progress; the
  // destructor joins or detaches them.
  state_->RequestStop();
  if (result_.ok()) {
    const std::string where = running.empty() ? std::string("receiving a job") : "still running " + running;
    result_ = Status::TimedOut("parallel restore on " + state_->display + ": not finished within " +
                               FormatSeconds(timeout) + " (" + where + ")");
  }
  return result_;
}

ParallelRestoreServer::~ParallelRestoreServer() {
  if (!state_->receiver.joinable() && !state_->runner.joinable()) return;  // never started, or joined
  if (StopAndJoin(Clock::now() + kStopGrace)) return;
  // A runner stuck past the grace period: let it go. It holds its own
  // reference to the state; the process may well be about to exit.
  state_->receiver.detach();
  state_->runner.detach();
}

// ---- The client ----

Status SendParallelRestoreJob(const std::string& name, const ParallelRestoreJob& job, milliseconds timeout) {
  const std::string what =
      "parallel restore: sending the job of " + JobLabel(job.image_id, job.pid) + " to " + Display(name);
  if (job.gpus.size() > kParallelRestoreMaxGpus)
    return Status::InvalidArgument(what + ": " + std::to_string(job.gpus.size()) + " GPUs (at most " +
                                   std::to_string(kParallelRestoreMaxGpus) + ")");
  std::vector<int> fds;
  for (const ParallelRestoreGpu& gpu : job.gpus) {
    for (const ParallelRestoreBo& bo : gpu.bos) {
      if (!bo.dmabuf.valid())
        return Status::InvalidArgument(what + ": BO " + std::to_string(bo.index) + " has no dma-buf fd");
      fds.push_back(bo.dmabuf.get());
    }
  }
  if (fds.size() > kParallelRestoreMaxBos)
    return Status::InvalidArgument(what + ": " + std::to_string(fds.size()) + " BOs (at most " +
                                   std::to_string(kParallelRestoreMaxBos) + ")");

  Header h{Command::kJob, job.image_id, job.pid, static_cast<uint32_t>(job.gpus.size()),
           static_cast<uint32_t>(fds.size())};
  std::vector<uint8_t> message(kHeaderSize + h.gpu_count * kGpuEntrySize + fds.size() * kBoEntrySize);
  EncodeHeader(h, message.data());
  uint8_t* p = message.data() + kHeaderSize;
  for (const ParallelRestoreGpu& gpu : job.gpus) {
    StoreLE32(p, gpu.image_gpu_id);
    StoreLE32(p + 4, gpu.target_gpu_id);
    StoreLE32(p + 8, static_cast<uint32_t>(gpu.bos.size()));
    p += kGpuEntrySize;
  }
  for (const ParallelRestoreGpu& gpu : job.gpus) {
    for (const ParallelRestoreBo& bo : gpu.bos) {
      StoreLE32(p, bo.index);
      StoreLE32(p + 4, 0);
      StoreLE64(p + 8, bo.size);
      p += kBoEntrySize;
    }
  }

  const Deadline deadline(timeout);
  VF_ASSIGN_OR_RETURN(UniqueFd conn, ConnectAbstract(name, deadline, what));
  VF_RETURN_IF_ERROR(SendAll(conn.get(), message, deadline.Left(), what + ": header and entries"));
  for (size_t sent = 0; sent < fds.size();) {
    const size_t n = std::min(kMaxFdsPerMessage, fds.size() - sent);
    uint8_t word[kFdBatchSize];
    StoreLE32(word, static_cast<uint32_t>(n));
    VF_RETURN_IF_ERROR(SendWithFds(conn.get(), word, std::span<const int>(fds).subspan(sent, n), deadline.Left(),
                                   what + ": fds " + std::to_string(sent) + ".." + std::to_string(sent + n - 1)));
    sent += n;
  }
  uint8_t ack[kAckSize];
  Status acked = RecvAll(conn.get(), ack, deadline.Left(), what + ": waiting for the acknowledgement");
  if (acked.code() == Status::Code::kTruncated)
    return Status::IoError(what +
                           ": the server closed the connection without acknowledging the job (it refused "
                           "it or stopped; the main CRIU process reports why)");
  VF_RETURN_IF_ERROR(acked);
  if (LoadLE32(ack) != kAckMagic) return Status::Corruption(what + ": the server answered with a wrong word");
  return Status::Ok();
}

}  // namespace vramflow
