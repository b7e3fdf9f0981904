// SPDX-License-Identifier: MIT
#include "common/owner_tag.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <optional>

namespace vramflow {
namespace {

// Field 22 of /proc/PID/stat; nullopt when it cannot be read.
std::optional<unsigned long long> StartTime(long pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return std::nullopt;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses: fields are
  // counted from its last ')'.
  std::string_view text(buf, n);
  size_t paren = text.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  int field = 2;
  size_t pos = paren + 1;
  while (pos < text.size() && field < 22) {
    if (text[pos] == ' ') {
      ++field;
      while (pos < text.size() && text[pos] == ' ') ++pos;
      if (field == 22) break;
      continue;
    }
    ++pos;
  }
  unsigned long long value = 0;
  auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() + pos) return std::nullopt;
  return value;
}

// Parses "PID.START" at the start of `text`; its length, or 0.
size_t ParseTag(std::string_view text, long* pid, unsigned long long* start) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *pid);
  if (ec != std::errc() || p == text.data() || p == text.data() + text.size() || *p != '.' || *pid <= 0) return 0;
  const char* s = p + 1;
  auto [q, ec2] = std::from_chars(s, text.data() + text.size(), *start);
  if (ec2 != std::errc() || q == s) return 0;
  return static_cast<size_t>(q - text.data());
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  (void)(type == FTW_DP ? ::rmdir(path) : ::unlink(path));
  return 0;
}

}  // namespace

std::string OwnerTag() {
  const long pid = ::getpid();
  return std::to_string(pid) + "." + std::to_string(StartTime(pid).value_or(0));
}

bool OwnerAlive(std::string_view tag) {
  long pid = 0;
  unsigned long long start = 0;
  if (ParseTag(tag, &pid, &start) != tag.size()) return true;  // not a tag: not ours to judge
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::optional<unsigned long long> now = StartTime(pid);
  if (!now) return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
  return *now == start;
}

int SweepDeadTemporaries(const std::string& dir, std::string_view marker) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    size_t at = name.find(marker);
    if (at == std::string_view::npos) continue;
    std::string_view rest = name.substr(at + marker.size());
    long pid = 0;
    unsigned long long start = 0;
    size_t length = ParseTag(rest, &pid, &start);
    if (length == 0 || (length < rest.size() && rest[length] != '-' && rest[length] != '.')) continue;
    if (OwnerAlive(rest.substr(0, length))) continue;
    const std::string path = dir + "/" + std::string(name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    int r = S_ISDIR(st.st_mode) ? ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) : ::unlink(path.c_str());
    if (r == 0 && ::lstat(path.c_str(), &st) != 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace vramflow
