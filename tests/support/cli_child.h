// SPDX-License-Identifier: MIT
// CliChild: a `vramflow` process started by a test (fork + exec, no shell),
// so that the test can signal it and read its own exit status: stdout and
// stderr go to a log file, stdin comes from a given fd (or /dev/null).
// Killed and reaped on destruction if still running. Header-only, so that
// each test binary (vramflow_tests, vramflow_s3_tests) can use it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace vramflow::testing {

class CliChild {
 public:
  // `env` entries ("NAME=value") are added to (or replace those of) this
  // process's environment.
  CliChild(const std::string& binary, const std::vector<std::string>& args, std::string log, int stdin_fd = -1,
           const std::vector<std::string>& env = {})
      : log_(std::move(log)) {
    std::vector<std::string> argv_strings = {binary};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      if (std::none_of(env.begin(), env.end(), [&](const std::string& x) { return x.rfind(name + "=", 0) == 0; }))
        env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    const char* log_path = log_.c_str();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      int in = stdin_fd >= 0 ? stdin_fd : ::open("/dev/null", O_RDONLY);
      int out = ::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork failed";
  }
  ~CliChild() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }
  CliChild(const CliChild&) = delete;
  CliChild& operator=(const CliChild&) = delete;

  // Reaps the process if it has exited; true while it runs.
  bool running() {
    if (pid_ <= 0 || exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) Reaped(status);
    return !exited_;
  }
  pid_t pid() const { return pid_; }
  void Kill(int sig) {
    if (pid_ > 0 && !exited_) ::kill(pid_, sig);
  }
  // The exit status; 128 + N when killed by signal N (a shell's convention,
  // so "killed by SIGTERM" and "exited 143" look alike: see killed_by());
  // -1 when still running after `timeout` (the process is then killed).
  int Wait(std::chrono::milliseconds timeout) {
    const auto start = std::chrono::steady_clock::now();
    while (running()) {
      if (std::chrono::steady_clock::now() - start > timeout) {
        ADD_FAILURE() << "process " << pid_ << " did not exit within " << timeout.count() << " ms; killing it\n"
                      << Log();
        ::kill(pid_, SIGKILL);
        int status;
        ::waitpid(pid_, &status, 0);
        exited_ = true;
        code_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return code_;
  }
  // The signal that ended the process (0: it exited by itself).
  int killed_by() const { return killed_by_; }
  std::string Log() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  void Reaped(int status) {
    exited_ = true;
    killed_by_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
  int killed_by_ = 0;
};

// A pipe for a child's stdin: the read end goes to the child, the test keeps
// the (non-blocking) write end.
struct ChildStdin {
  int read_end = -1, write_end = -1;
  ChildStdin() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_end = fds[0];
    write_end = fds[1];
    ::fcntl(write_end, F_SETFL, O_NONBLOCK);
  }
  ~ChildStdin() {
    CloseRead();
    CloseWrite();
  }
  ChildStdin(const ChildStdin&) = delete;
  ChildStdin& operator=(const ChildStdin&) = delete;
  void CloseRead() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
  void CloseWrite() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
  // Writes what the pipe takes of `data` from `*offset` on, without
  // blocking; false once the reader is gone.
  bool Feed(const std::string& data, size_t* offset) {
    while (*offset < data.size()) {
      ssize_t n = ::write(write_end, data.data() + *offset, data.size() - *offset);
      if (n > 0) {
        *offset += static_cast<size_t>(n);
        continue;
      }
      return n < 0 && (errno == EAGAIN || errno == EINTR);
    }
    return true;
  }
};

}  // namespace vramflow::testing
