// SPDX-License-Identifier: MIT
// Shell command lines from tests: quoting words, and running a line with
// its output captured. Header-only, so every test binary can use it
// (vramflow_s3_tests does not link test_util.cc).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace vramflow::testing {

// Single-quotes a word for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int code = -1;       // the exit status; -1 when it did not exit normally
  std::string output;  // stdout and stderr together, unless the line redirects them
};

// Runs `line` with /bin/sh in a subshell, so that its own redirections hold.
inline CommandResult RunShell(const std::string& line) {
  CommandResult r;
  FILE* p = ::popen(("( " + line + " ) 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace vramflow::testing
