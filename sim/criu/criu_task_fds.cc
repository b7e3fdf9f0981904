// SPDX-License-Identifier: MIT
#include "sim/criu/criu_task_fds.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "common/unique_fd.h"

namespace vramflow {
namespace {

// Room for CRIU's service fds (it has about 20 kinds) above the task's.
constexpr int kServiceFdSlots = 24;
// The kernel grows fd tables in steps of this many entries (1024 / pointer
// size); CRIU aligns its service fds to the end of such a table.
constexpr int kFdTableStep = 1024 / sizeof(void*);

// Where CRIU's service fds end (choose_service_fd_base): past the task's
// highest fd, at the end of a power-of-two number of table steps, within
// the fd limit.
Result<int> ServiceFdBase(int highest_fd) {
  const int needed = highest_fd + kServiceFdSlots + 16;
  int steps = 1;
  while (steps * kFdTableStep < needed) steps *= 2;
  int base = steps * kFdTableStep;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::FromErrno("getrlimit(RLIMIT_NOFILE)", errno);
  if (limit.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(base) > limit.rlim_cur) {
    base = static_cast<int>(limit.rlim_cur) / kFdTableStep * kFdTableStep;
    if (base < needed)
      return Status::InvalidArgument("the fd limit " + std::to_string(limit.rlim_cur) +
                                     " leaves no room for CRIU's service fds above fd " + std::to_string(highest_fd));
  }
  return base;
}

std::string Describe(const TaskFd& entry) {
  switch (entry.kind) {
    case TaskFd::Kind::kExt:
      return "fd " + std::to_string(entry.fd) + " (external file " + std::to_string(entry.ext_id) + ")";
    case TaskFd::Kind::kFile:
      return "fd " + std::to_string(entry.fd) + " (" + entry.path + ")";
    case TaskFd::Kind::kInherit:
      return "fd " + std::to_string(entry.fd) + " (inherited)";
  }
  return "fd " + std::to_string(entry.fd);
}

}  // namespace

TaskFdRestore::TaskFdRestore(std::vector<TaskFd> fds) : fds_(std::move(fds)) {
  std::sort(fds_.begin(), fds_.end(), [](const TaskFd& a, const TaskFd& b) { return a.fd < b.fd; });
  for (const TaskFd& entry : fds_) pending_.insert(entry.fd);
}

Status TaskFdRestore::MoveServiceFdsAndCloseTheRest(std::span<int* const> service) {
  std::vector<int*> moving(service.begin(), service.end());
  int highest = fds_.empty() ? -1 : fds_.back().fd;
  for (TaskFd& entry : fds_) {
    if (entry.kind == TaskFd::Kind::kInherit) moving.push_back(&entry.inherited);
  }
  for (int* fd : moving) highest = std::max(highest, *fd);
  VF_ASSIGN_OR_RETURN(int base, ServiceFdBase(highest));
  // One new number per fd, however many ints name it.
  std::map<int, int> moved;
  int next = base - 1;
  for (int* fd : moving) {
    if (*fd < 0) continue;
    auto it = moved.find(*fd);
    if (it == moved.end()) {
      if (next < base - kServiceFdSlots) return Status::Internal("more service fds than CRIU has room for");
      const int to = ::fcntl(*fd, F_DUPFD_CLOEXEC, next);
      if (to < 0)
        return Status::FromErrno("moving fd " + std::to_string(*fd) + " to service fd " + std::to_string(next), errno);
      if (to != next) {
        ::close(to);
        return Status::Internal("service fd " + std::to_string(next) + " is taken");
      }
      it = moved.emplace(*fd, next--).first;
    }
    *fd = it->second;
  }
  service_min_ = next + 1;

  // close_old_fds: everything else goes, whatever this process inherited.
  std::vector<int> open;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return Status::FromErrno("opening /proc/self/fd", errno);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != ::dirfd(dir)) open.push_back(fd);
  }
  ::closedir(dir);
  for (int fd : open) {
    if (fd < service_min_ || fd >= base) ::close(fd);
  }
  return Status::Ok();
}

Status TaskFdRestore::Restore(const ExtFileOpener& open_ext) {
  bool again = true, progress = true;
  while (again && progress) {
    again = progress = false;
    for (const TaskFd& entry : fds_) {
      if (!pending_.count(entry.fd)) continue;
      bool retry = false;
      Result<int> opened = Open(entry, open_ext, &retry);
      if (!opened.ok()) return opened.status().WithContext("restoring " + Describe(entry));
      if (retry) {
        // CRIU leaves whatever fd came with the request alone.
        again = true;
        continue;
      }
      VF_RETURN_IF_ERROR(Install(entry, *opened).WithContext("restoring " + Describe(entry)));
      pending_.erase(entry.fd);
      progress = true;
    }
  }
  if (!again) return Status::Ok();
  // CRIU would wait for another task to make progress; no other task here can.
  std::string waiting;
  for (int fd : pending_) waiting += (waiting.empty() ? "" : ", ") + std::to_string(fd);
  return Status::Internal("fds " + waiting + " ask to be retried and nothing else is left to restore");
}

int TaskFdRestore::FindUnusedFd() const {
  int prev = service_min_ - 1;
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (prev > *it) return *it + 1;
    prev = *it - 1;
  }
  return -1;
}

Result<int> TaskFdRestore::Open(const TaskFd& entry, const ExtFileOpener& open_ext, bool* retry) {
  switch (entry.kind) {
    case TaskFd::Kind::kExt: {
      VF_ASSIGN_OR_RETURN(ExtFileOpen opened, open_ext(entry.ext_id));
      *retry = opened.retry;
      return opened.fd;
    }
    case TaskFd::Kind::kFile: {
      const int fd = ::open(entry.path.c_str(), O_RDWR | O_CREAT, 0600);
      if (fd < 0) return Status::FromErrno("opening " + entry.path, errno);
      return fd;
    }
    case TaskFd::Kind::kInherit: {
      const int fd = ::fcntl(entry.inherited, F_DUPFD, 0);
      if (fd < 0) return Status::FromErrno("duplicating inherited fd " + std::to_string(entry.inherited), errno);
      return fd;
    }
  }
  return Status::Internal("unknown kind of fd");
}

// reopen_fd_as: F_DUPFD, not dup2, so a number that is taken is an error,
// never a file silently replaced.
Status TaskFdRestore::Install(const TaskFd& entry, int opened) {
  if (opened != entry.fd) {
    UniqueFd source(opened);
    const int installed = ::fcntl(opened, F_DUPFD, entry.fd);
    if (installed < 0)
      return Status::FromErrno("dup " + std::to_string(opened) + " -> " + std::to_string(entry.fd), errno);
    if (installed != entry.fd) {
      ::close(installed);
      return Status::AlreadyExists("fd " + std::to_string(entry.fd) + " already in use");
    }
  }
  if (::fcntl(entry.fd, F_SETFD, 0) != 0)
    return Status::FromErrno("setting the flags of fd " + std::to_string(entry.fd), errno);
  return Status::Ok();
}

}  // namespace vramflow
