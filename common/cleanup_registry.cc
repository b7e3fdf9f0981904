// SPDX-License-Identifier: MIT
#include "common/cleanup_registry.h"

#include <utility>

namespace vramflow {

CleanupRegistry::Id CleanupRegistry::Add(Undo undo, Kind kind) {
  std::lock_guard lock(mu_);
  if (running_) return 0;
  Id id = next_++;
  undos_.emplace(id, std::make_pair(kind, std::move(undo)));
  return id;
}

Result<CleanupRegistry::Id> CleanupRegistry::Create(const std::function<Status()>& create, Undo undo, Kind kind) {
  std::lock_guard lock(mu_);
  if (running_) return InterruptedStatus("the command was interrupted");
  VF_RETURN_IF_ERROR(create());
  Id id = next_++;
  undos_.emplace(id, std::make_pair(kind, std::move(undo)));
  return id;
}

void CleanupRegistry::Remove(Id id) {
  {
    std::lock_guard lock(mu_);
    undos_.erase(id);
  }
  // A Run() that took the entry before this: wait until its undo is done.
  std::lock_guard wait(run_mu_);
}

Status CleanupRegistry::Exclusive(const std::function<Status()>& step) {
  std::lock_guard lock(mu_);
  if (running_) return InterruptedStatus("the command was interrupted");
  return step();
}

void CleanupRegistry::Run(const std::string& reason) {
  std::unique_lock lock(mu_);
  if (running_) return;
  running_ = true;
  reason_ = reason;
  std::map<Id, std::pair<Kind, Undo>> undos = std::move(undos_);
  undos_.clear();
  // Taken before mu_ is let go, so that a Remove() of one of these waits.
  std::lock_guard run(run_mu_);
  lock.unlock();  // undos may call reason()
  for (Kind kind : {Kind::kLocal, Kind::kRemote})
    for (auto it = undos.rbegin(); it != undos.rend(); ++it)
      if (it->second.first == kind) it->second.second();
}

bool CleanupRegistry::interrupted() const {
  std::lock_guard lock(mu_);
  return running_;
}

std::string CleanupRegistry::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

CleanupEntry::CleanupEntry(CleanupRegistry* registry, CleanupRegistry::Undo undo, CleanupRegistry::Kind kind)
    : registry_(registry) {
  if (registry_) id_ = registry_->Add(std::move(undo), kind);
}

Result<CleanupEntry> CleanupEntry::Create(CleanupRegistry* registry, const std::function<Status()>& create,
                                          CleanupRegistry::Undo undo, CleanupRegistry::Kind kind) {
  CleanupEntry entry;
  if (!registry) {
    VF_RETURN_IF_ERROR(create());
    return entry;
  }
  VF_ASSIGN_OR_RETURN(entry.id_, registry->Create(create, std::move(undo), kind));
  entry.registry_ = registry;
  return entry;
}

CleanupEntry::CleanupEntry(CleanupEntry&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), id_(std::exchange(other.id_, 0)) {}

CleanupEntry& CleanupEntry::operator=(CleanupEntry&& other) noexcept {
  if (this != &other) {
    Release();
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void CleanupEntry::Release() {
  if (registry_ && id_ != 0) registry_->Remove(id_);
  registry_ = nullptr;
  id_ = 0;
}

Status InterruptedStatus(const std::string& what) { return Status::Cancelled(what + " (interrupted by a signal)"); }

}  // namespace vramflow
