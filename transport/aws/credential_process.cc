// SPDX-License-Identifier: MIT
#include "transport/aws/credential_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "common/printable.h"

extern char** environ;

namespace vramflow::s3 {
namespace {

// Owns the pipes' read ends and the child until it is reaped. The child
// leads a process group of its own, so that a command killed for time or
// output, or by an interrupt, takes whatever it started with it (a
// grandchild holding a pipe open would otherwise outlive it).
class Child {
 public:
  ~Child() {
    for (int fd : {out_fd_, err_fd_})
      if (fd >= 0) ::close(fd);
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      Reap();
    }
  }
  Status Start(const std::string& command, CleanupRegistry* cleanup) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    out_fd_ = out[0];
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[1]);
      return Status::FromErrno("pipe", errno);
    }
    err_fd_ = err[0];
    // Read only when poll says so, and drained to the end once it exited.
    ::fcntl(err_fd_, F_SETFL, ::fcntl(err_fd_, F_GETFL) | O_NONBLOCK);
    // The spawn and the registration of the group's kill are one step: an
    // interrupt either finds the group or comes before it exists.
    Result<CleanupEntry> entry = CleanupEntry::Create(
        cleanup, [&] { return Spawn(command, out[1], err[1]); },
        [this] {
          if (pid_t group = group_.load(); group > 0) ::kill(-group, SIGKILL);
        });
    ::close(out[1]);
    ::close(err[1]);
    if (!entry.ok()) return entry.status();
    entry_ = std::move(*entry);
    return Status::Ok();
  }
  int out_fd() const { return out_fd_; }
  int err_fd() const { return err_fd_; }
  // Whether the child has exited (not reaped yet: its group stays reserved).
  bool Exited() const {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
  }
  // Waits for the exit status.
  int Wait() { return Reap(); }

 private:
  Status Spawn(const std::string& command, int out, int err) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return Status::FromErrno("starting /bin/sh", rc);
    pid_ = pid;
    group_.store(pid);
    return Status::Ok();
  }
  // The kill on interrupt is withdrawn before the group's id is freed.
  int Reap() {
    entry_.Release();
    group_.store(0);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return st;
  }

  pid_t pid_ = -1;
  std::atomic<pid_t> group_{0};  // read by the interrupt's undo
  int out_fd_ = -1;
  int err_fd_ = -1;
  CleanupEntry entry_;
};

enum class Read { kData, kNothingNow, kEnd };

// One read of `fd` into `kept` (up to `limit` bytes kept, the rest read and
// dropped; `total` counts all). An error counts as the end.
Read ReadSome(int fd, std::string* kept, size_t limit, size_t* total) {
  char buf[4096];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Read::kNothingNow : Read::kEnd;
    if (got == 0) return Read::kEnd;
    *total += static_cast<size_t>(got);
    kept->append(buf, std::min(static_cast<size_t>(got), limit - std::min(limit, kept->size())));
    return Read::kData;
  }
}

// " (stderr: ...)", escaped, for an error; "" when it wrote nothing.
std::string StderrNote(std::string text, size_t total) {
  const bool cut = total > text.size();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return "";
  return " (stderr: " + EscapedText(text) + (cut ? "..." : "") + ")";
}

}  // namespace

Result<TimedCredentials> RunCredentialProcess(const std::string& command, const CredentialProcessOptions& options) {
  const std::string& what = options.what;
  Child child;
  VF_RETURN_IF_ERROR(child.Start(command, options.cleanup).WithContext(what));
  std::string out, err;
  size_t out_total = 0, err_total = 0;
  bool out_open = true, err_open = true;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  // Until stdout ends and stderr ends too, or the command exits (what it
  // started may hold stderr open).
  while (out_open || (err_open && !child.Exited())) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Status::TimedOut(what + ": no result within " + std::to_string(options.timeout.count()) + " ms (killed)" +
                              StderrNote(err, err_total));
    pollfd p[2] = {{out_open ? child.out_fd() : -1, POLLIN, 0}, {err_open ? child.err_fd() : -1, POLLIN, 0}};
    int wait_ms = static_cast<int>(out_open ? left.count() : std::min<int64_t>(left.count(), 20));
    int n = ::poll(p, 2, wait_ms);
    if (n < 0 && errno != EINTR) return Status::FromErrno(what + ": waiting for its output", errno);
    if (n <= 0) continue;
    if (p[0].revents != 0 && ReadSome(child.out_fd(), &out, options.max_output + 1, &out_total) == Read::kEnd)
      out_open = false;
    if (out_total > options.max_output)
      return Status::InvalidArgument(what + ": more than " + std::to_string(options.max_output) +
                                     " bytes of output (killed)" + StderrNote(err, err_total));
    if (p[1].revents != 0 && ReadSome(child.err_fd(), &err, kKeptStderr, &err_total) == Read::kEnd) err_open = false;
  }
  // What it wrote to stderr just before it exited (bounded: a grandchild may go on writing).
  for (size_t reads = 0; err_open && reads < 256; ++reads)
    if (ReadSome(child.err_fd(), &err, kKeptStderr, &err_total) != Read::kData) break;
  int st = child.Wait();
  const std::string note = StderrNote(err, err_total);
  if (WIFSIGNALED(st)) return Status::IoError(what + ": killed by signal " + std::to_string(WTERMSIG(st)) + note);
  if (WEXITSTATUS(st) != 0)
    return Status::IoError(what + ": exited with status " + std::to_string(WEXITSTATUS(st)) + note);
  // It exited 0: its stderr is dropped, as the AWS CLI drops it.
  return ParseCredentialProcessOutput(out, what);
}

Result<TimedCredentials> ParseCredentialProcessOutput(std::string_view output, const std::string& what) {
  nlohmann::json doc = nlohmann::json::parse(output, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument(what + ": output is not a JSON object");
  auto version = doc.find("Version");
  // Compared as a JSON number: 4294967297 is not 1 (cut to an int it was).
  if (version == doc.end() || !version->is_number_integer() || *version != 1)
    return Status::InvalidArgument(what + ": output needs \"Version\": 1");
  return ParseCredentialJson(output, what);
}

}  // namespace vramflow::s3
