// SPDX-License-Identifier: MIT
#include "transport/aws_credential_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

extern char** environ;

namespace vramflow::s3 {
namespace {

// Owns the pipe's read end and the child until it is reaped. The child
// leads a process group of its own, so that a command killed for time or
// output takes whatever it started with it (a grandchild holding our
// stderr open would otherwise outlive it).
class Child {
 public:
  ~Child() {
    if (read_fd_ >= 0) ::close(read_fd_);
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int st;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
  }
  Status Start(const std::string& command) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    int rc = posix_spawn(&pid_, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    read_fd_ = fds[0];
    if (rc != 0) {
      pid_ = -1;
      return Status::FromErrno("starting /bin/sh", rc);
    }
    return Status::Ok();
  }
  int read_fd() const { return read_fd_; }
  // Waits for the exit status (after stdout closed).
  int Wait() {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return st;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
};

}  // namespace

Result<TimedCredentials> RunCredentialProcess(const std::string& command, std::chrono::milliseconds timeout,
                                              size_t max_output) {
  std::string what = "credential_process '" + command + "'";
  Child child;
  VF_RETURN_IF_ERROR(child.Start(command).WithContext(what));
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::TimedOut(what + ": no result within " + std::to_string(timeout.count()) + " ms (killed)");
    pollfd p{child.read_fd(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t got = ::read(child.read_fd(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::FromErrno(what + ": reading its output", errno);
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
    if (out.size() > max_output)
      return Status::InvalidArgument(what + ": more than " + std::to_string(max_output) + " bytes of output (killed)");
  }
  int st = child.Wait();
  if (WIFSIGNALED(st)) return Status::IoError(what + ": killed by signal " + std::to_string(WTERMSIG(st)));
  if (WEXITSTATUS(st) != 0) return Status::IoError(what + ": exited with status " + std::to_string(WEXITSTATUS(st)));
  nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument(what + ": output is not a JSON object");
  auto version = doc.find("Version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int>() != 1)
    return Status::InvalidArgument(what + ": output needs \"Version\": 1");
  return ParseCredentialJson(out, what);
}

}  // namespace vramflow::s3
