// SPDX-License-Identifier: MIT
// FdCache: a bounded set of open files, each opened when it is first asked
// for and closed again when the least recently used one has to make room.
//
// Users get a shared reference: a file the cache lets go of stays open until
// its last user (a copy in flight) lets go too, so closing one early is
// safe. At most `capacity` files are held by the cache itself, plus those
// its users still hold.
//
// Thread safety: every method may be called from any thread concurrently.
// Opening runs outside the lock; two threads missing the same key at once
// may both open it, and the second copy is closed as soon as its user is
// done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

// Opens one file, the same one each time it is called (or fails saying why
// it cannot). Called from any thread.
using FileOpener = std::function<Result<UniqueFd>()>;

class FdCache {
 public:
  explicit FdCache(size_t capacity);
  FdCache(const FdCache&) = delete;
  FdCache& operator=(const FdCache&) = delete;

  // The open file under `key`, opened with `open` if the cache does not hold it.
  Result<std::shared_ptr<const UniqueFd>> Get(uint64_t key, const FileOpener& open);
  // Lets go of the file under `key`, if held; it closes once its users are done.
  void Drop(uint64_t key);
  // Files the cache holds now (not counting those only users still hold).
  size_t size() const;

 private:
  using Entry = std::pair<uint64_t, std::shared_ptr<const UniqueFd>>;

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> recent_;                                          // guarded by mu_; most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_key_;  // guarded by mu_
};

}  // namespace vramflow
