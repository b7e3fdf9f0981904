// SPDX-License-Identifier: MIT
#include "common/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "common/printable.h"

namespace vramflow {

Result<std::vector<std::string>> SplitSafeRelativePath(std::string_view name) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("object name '" + std::string(name) + "' refused: " + why);
  };
  if (name.empty()) return refuse("empty");
  if (name.find('\0') != std::string_view::npos) return refuse("contains a NUL byte");
  if (name.front() == '/') return refuse("absolute path");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    std::string_view part = name.substr(start, slash - start);
    if (part.empty()) return refuse("empty path component");
    if (part == "." || part == "..") return refuse(part == "." ? "'.' path component" : "'..' path component");
    if (part.size() > 255) return refuse("path component longer than 255 bytes");
    parts.emplace_back(part);
    start = slash + 1;
  }
  if (parts.size() > 64) return refuse("more than 64 path components");
  return parts;
}

Status CheckSafeFileName(std::string_view name) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("stream name " + Printable(name) + " refused: " + why);
  };
  constexpr size_t kMaxBytes = 200;
  if (name.empty()) return refuse("empty");
  if (name.size() > kMaxBytes) return refuse("longer than " + std::to_string(kMaxBytes) + " bytes");
  if (name.front() == '.' || name.front() == '-') return refuse("starts with '" + std::string(1, name.front()) + "'");
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return refuse(c == '/' ? "contains '/'" : "contains a byte other than A-Z a-z 0-9 . _ -");
  }
  return Status::Ok();
}

Result<UniqueFd> OpenParentDirectory(int root_fd, const std::vector<std::string>& components, bool create) {
  UniqueFd current(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!current.valid()) return Status::FromErrno("dup", errno);
  for (size_t i = 0; i + 1 < components.size(); ++i) {
    const std::string& part = components[i];
    if (create && ::mkdirat(current.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::FromErrno("creating directory '" + part + "'", errno);
    int fd = ::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("opening directory '" + part + "' (symlinks are not followed)", errno);
    current.Reset(fd);
  }
  return current;
}

}  // namespace vramflow
