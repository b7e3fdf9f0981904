// SPDX-License-Identifier: MIT
// CleanupRegistry: what to undo if the process is stopped by a signal while
// it works: temporary files and staging directories to remove, multipart
// uploads to abort, network peers to tell. A command owns one (tools/
// interrupt.h runs it when SIGINT, SIGTERM or SIGHUP arrives, then exits);
// libraries take a pointer in their options (nullptr: nothing is registered)
// and register what they create, through CleanupEntry.
//
// Run() happens at most once, on the signal watcher's thread, while the
// work may still be going on: an undo must be safe to call from another
// thread (removing a path is; so is a message sent under the connection's
// lock). Commit steps that must not interleave with it (renaming a
// temporary file into place) go through Exclusive().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace vramflow {

class CleanupRegistry {
 public:
  using Id = uint64_t;
  using Undo = std::function<void()>;
  // Local undos (removing files) run first: they cannot hang. Remote ones
  // (aborting an upload, telling a peer) may wait on the network.
  enum class Kind { kLocal, kRemote };

  // Registers `undo`; 0 (and nothing registered) once Run() has begun, so
  // that what the caller just created is removed by the caller itself.
  Id Add(Undo undo, Kind kind = Kind::kLocal);
  // Runs `create` (which makes what `undo` removes) and, if it succeeds,
  // registers `undo`, with no Run() in between: whatever is created is
  // undone. kCancelled, `create` not run, once Run() has begun.
  Result<Id> Create(const std::function<Status()>& create, Undo undo, Kind kind = Kind::kLocal);
  // Forgets an entry (done, or undone by its owner). Waits for a Run() in
  // progress, so an undo never outlives what it points at. Not from an undo.
  void Remove(Id id);
  // Runs `step` unless Run() has begun (then kCancelled, step not run); no
  // Run() starts while it runs. For the step that makes work final.
  Status Exclusive(const std::function<Status()>& step);
  // Runs every registered undo once, local ones first, newest first within
  // a kind; later Add()s fail.
  // `reason` ("interrupted by SIGTERM") is what reason() then returns, for
  // undos that tell a peer why.
  void Run(const std::string& reason);
  bool interrupted() const;
  std::string reason() const;

 private:
  mutable std::mutex mu_;
  std::mutex run_mu_;                          // held while Run() runs the undos; after mu_
  bool running_ = false;                       // guarded by mu_
  std::string reason_;                         // guarded by mu_
  Id next_ = 1;                                // guarded by mu_
  std::map<Id, std::pair<Kind, Undo>> undos_;  // guarded by mu_
};

// One registration, removed when destroyed (or by Release()). With a null
// registry it registers nothing.
class CleanupEntry {
 public:
  CleanupEntry() = default;
  CleanupEntry(CleanupRegistry* registry, CleanupRegistry::Undo undo,
               CleanupRegistry::Kind kind = CleanupRegistry::Kind::kLocal);
  ~CleanupEntry() { Release(); }
  CleanupEntry(CleanupEntry&& other) noexcept;
  CleanupEntry& operator=(CleanupEntry&& other) noexcept;
  CleanupEntry(const CleanupEntry&) = delete;
  CleanupEntry& operator=(const CleanupEntry&) = delete;

  // `create` and the registration of `undo` as one step
  // (CleanupRegistry::Create); with a null registry, just `create`.
  static Result<CleanupEntry> Create(CleanupRegistry* registry, const std::function<Status()>& create,
                                     CleanupRegistry::Undo undo,
                                     CleanupRegistry::Kind kind = CleanupRegistry::Kind::kLocal);

  // False when the registry was already running (an interrupted process):
  // the caller should undo what it just did and fail with kCancelled.
  bool registered() const { return registry_ == nullptr || id_ != 0; }
  void Release();

 private:
  CleanupRegistry* registry_ = nullptr;
  CleanupRegistry::Id id_ = 0;
};

// The Status a step returns when the process is being interrupted.
Status InterruptedStatus(const std::string& what);

}  // namespace vramflow
