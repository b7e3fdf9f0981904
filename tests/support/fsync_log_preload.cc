// SPDX-License-Identifier: MIT
// An LD_PRELOAD library for tests: logs what a process fsyncs.
//
// Every fsync() and fdatasync() appends the path its descriptor names
// (/proc/self/fd/N) as one line to the file $VRAMFLOW_FSYNC_LOG, then calls
// the real function. Tests run the vramflow binary with it to see which
// files and directories a command makes durable. Thread-safe (one O_APPEND
// write per line).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void LogPath(int fd) {
  const char* log = std::getenv("VRAMFLOW_FSYNC_LOG");
  if (log == nullptr) return;
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, path, sizeof(path) - 1);
  if (n < 0) return;
  path[n++] = '\n';
  int out = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (out < 0) return;
  (void)!::write(out, path, static_cast<size_t>(n));
  ::close(out);
}

using SyncFunction = int (*)(int);

SyncFunction Real(const char* name) { return reinterpret_cast<SyncFunction>(::dlsym(RTLD_NEXT, name)); }

}  // namespace

extern "C" int fsync(int fd) {
  static SyncFunction real = Real("fsync");
  LogPath(fd);
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  static SyncFunction real = Real("fdatasync");
  LogPath(fd);
  return real(fd);
}
