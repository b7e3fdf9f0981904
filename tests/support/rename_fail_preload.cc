// SPDX-License-Identifier: MIT
// An LD_PRELOAD library for tests: makes one move into place fail.
//
// renameat2() whose new name's last component is $VRAMFLOW_FAIL_RENAME
// fails with EIO (without moving anything), unless it exchanges two entries
// (RENAME_EXCHANGE, which unpack uses to put a replaced file back); every
// other call goes to the real function. Tests run `vramflow unpack` with it
// to fail the Nth move of a multi-object unpack after its checks passed,
// and see what is rolled back. Thread-safe (no state).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include <cstdlib>
#include <cstring>

namespace {

using Renameat2 = int (*)(int, const char*, int, const char*, unsigned);

bool FailsFor(const char* newpath) {
  const char* name = std::getenv("VRAMFLOW_FAIL_RENAME");
  if (name == nullptr || newpath == nullptr) return false;
  const char* slash = std::strrchr(newpath, '/');
  return std::strcmp(slash ? slash + 1 : newpath, name) == 0;
}

}  // namespace

extern "C" int renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, unsigned flags) {
  static Renameat2 real = reinterpret_cast<Renameat2>(::dlsym(RTLD_NEXT, "renameat2"));
  if ((flags & RENAME_EXCHANGE) == 0 && FailsFor(newpath)) {
    errno = EIO;
    return -1;
  }
  return real(olddirfd, oldpath, newdirfd, newpath, flags);
}
