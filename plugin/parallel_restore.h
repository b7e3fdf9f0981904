// SPDX-License-Identifier: MIT
// The parallel-restore channel: restored tasks hand their BOs' dma-buf fds to
// a worker in the main CRIU process, which fills the BOs while the tasks go
// on restoring their memory.
//
// In CRIU, RESTORE_EXT_FILE runs inside each forked restored task, and KFD's
// restore op gives that task one dma-buf fd per VRAM/GTT BO. The task sends
// them (SendParallelRestoreJob) over an abstract AF_UNIX socket to the main
// CRIU process and goes on as soon as the server has acknowledged receipt.
// There a ParallelRestoreServer, listening since plugin init and started in
// POST_FORKING, receives each job and runs a caller-supplied runner on it
// (the restore pipeline); RESUME_DEVICES_LATE calls Finish, which waits for
// every job sent so far and returns the first error, before KFD resumes the
// process. The wire format is documented in parallel_restore.cc.
//
// Threads: Start creates two threads with every signal blocked, a receiver
// (accepts in order, reads each job, acknowledges it) and a runner (runs the
// jobs one after another, in the order they arrived). Keeping the two apart
// means a task's send never waits for another task's copy. Listen, Start,
// Finish and the destructor are called from one thread (CRIU's main thread);
// they are not safe to call concurrently with each other.
//
// Errors: the first error wins (a job that could not be received, a runner
// that failed, a worker that did not finish in time); jobs that arrive after
// it are still received and acknowledged, so no task hangs, but not run, and
// their fds are closed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

// Bounds a job must respect; the server refuses larger ones before reading
// (or allocating for) them. KFD supports far fewer GPUs; a process with a
// million BOs would already exhaust CRIU's fd limit.
inline constexpr uint32_t kParallelRestoreMaxGpus = 256;
inline constexpr uint32_t kParallelRestoreMaxBos = 1u << 20;

struct ParallelRestoreBo {
  uint32_t index = 0;  // the BO's position among the KFD image's BO entries
  uint64_t size = 0;   // bytes
  UniqueFd dmabuf;     // the BO's dma-buf fd
};

struct ParallelRestoreGpu {
  uint32_t image_gpu_id = 0;   // gpu_id recorded in the image (names its VRAM stream)
  uint32_t target_gpu_id = 0;  // local GPU the BOs now live on
  std::vector<ParallelRestoreBo> bos;
};

struct ParallelRestoreJob {
  int32_t image_id = 0;  // CRIU ext-file id: names the images
  int32_t pid = 0;       // the restored task, for messages
  std::vector<ParallelRestoreGpu> gpus;
  // Filled by the server from SO_PEERCRED (ignored when sending): the
  // sending process as the kernel saw it at connect, in the server's pid and
  // user namespaces. Anyone in the network namespace can connect to an
  // abstract socket, so a runner may want to check these.
  int32_t peer_pid = 0;
  uint32_t peer_uid = 0;
};

// Fills the BOs of one job. Runs on the server's runner thread; it owns the
// job (and so its fds) and may keep nothing that outlives the server.
using ParallelRestoreRunner = std::function<Status(ParallelRestoreJob job)>;

// "vramflow-amdgpu-<pid>-<16 random hex digits>": a fresh abstract socket name.
std::string UniqueParallelRestoreName();

class ParallelRestoreServer {
 public:
  // How long the receiver waits for any progress from a connected task
  // before it gives up on that job (an error) and goes on with the next.
  static constexpr std::chrono::milliseconds kDefaultIoTimeout{10000};
  // How long the destructor waits for the threads to stop before it
  // detaches them (a runner stuck in the kernel must not hang CRIU's exit).
  static constexpr std::chrono::milliseconds kStopGrace{2000};

  // In the main CRIU process at plugin init, before tasks fork: binds a
  // listening AF_UNIX SOCK_STREAM socket (close-on-exec) to the abstract
  // name `name` (no leading NUL, at most 107 bytes, e.g. from
  // UniqueParallelRestoreName()). Connections queue until Start.
  static Result<std::unique_ptr<ParallelRestoreServer>> Listen(
      std::string name, std::chrono::milliseconds io_timeout = kDefaultIoTimeout);

  // POST_FORKING: starts the receiver and runner threads (all signals
  // blocked in them; CRIU's main thread keeps SIGCHLD). At most once.
  Status Start(ParallelRestoreRunner run);

  // RESUME_DEVICES_LATE: sends a quit command over the socket (it queues
  // behind every job already sent, since accept is FIFO), waits until every
  // job before it has run, joins the threads and returns OK or the first
  // error. After `timeout` it stops waiting: kTimedOut naming the job still
  // running, and the threads are told to stop after it. Idempotent: later
  // calls return the same result. Before Start: an Internal error.
  Status Finish(std::chrono::milliseconds timeout);

  // The abstract name, without the leading NUL.
  const std::string& name() const { return name_; }

  // Stops the threads if they still run (jobs not yet run are dropped, their
  // fds closed), waits up to kStopGrace for them, then joins or detaches.
  ~ParallelRestoreServer();

  ParallelRestoreServer(const ParallelRestoreServer&) = delete;
  ParallelRestoreServer& operator=(const ParallelRestoreServer&) = delete;

 private:
  struct State;  // shared with the threads, so a detached thread stays safe
  ParallelRestoreServer(std::string name, std::shared_ptr<State> state);
  // Tells the threads to stop and waits until `deadline` for them; true if they stopped (and were joined).
  bool StopAndJoin(std::chrono::steady_clock::time_point deadline);

  std::string name_;
  std::shared_ptr<State> state_;
  bool started_ = false;
  bool finished_ = false;
  Status result_;  // Finish's result once finished_
};

// In a restored task: connects to the server listening on `name`, sends
// `job` (header, GPUs, BO entries, then the fds in batches of
// kMaxFdsPerMessage) and returns once the server has acknowledged receipt of
// all of it, so the caller may close its own copies of the fds. Every BO
// needs a valid dmabuf fd; the fds stay owned by the caller. Fails after
// `timeout` in all (a server that is not listening fails at once).
Status SendParallelRestoreJob(const std::string& name, const ParallelRestoreJob& job,
                              std::chrono::milliseconds timeout);

}  // namespace vramflow
