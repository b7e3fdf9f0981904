// SPDX-License-Identifier: MIT
#include "common/private_directory.h"

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "common/printable.h"

namespace vramflow {
namespace {

// nftw stops at the first entry its callback fails: an entry already gone
// must not stop the walk.
int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

}  // namespace

void RemoveTree(const std::string& path) {
  struct stat st;
  for (int pass = 0; pass < 10 && ::lstat(path.c_str(), &st) == 0; ++pass)
    ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

Status PrivateDirectory::Create(const std::string& prefix, CleanupRegistry* cleanup) {
  std::string pattern = prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  // mkdtemp picks the name, so the undo reads it from `name`.
  auto name = std::make_shared<std::string>();
  VF_ASSIGN_OR_RETURN(entry_, CleanupEntry::Create(
                                  cleanup,
                                  [&]() -> Status {
                                    if (!::mkdtemp(buf.data()))
                                      return Status::FromErrno("creating the directory " + Printable(pattern), errno);
                                    *name = buf.data();
                                    return Status::Ok();
                                  },
                                  [name] { RemoveTree(*name); }));
  path_ = *name;
  cleanup_ = cleanup;
  return Status::Ok();
}

PrivateDirectory::~PrivateDirectory() {
  if (path_.empty()) return;
  // Removed here unless the cleanup has begun; then the cleanup removes it,
  // and Release() waits for that.
  auto remove = [this] {
    RemoveTree(path_);
    return Status::Ok();
  };
  (void)(cleanup_ ? cleanup_->Exclusive(remove) : remove());
  entry_.Release();
}

}  // namespace vramflow
