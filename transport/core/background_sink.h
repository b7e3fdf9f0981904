// SPDX-License-Identifier: MIT
// BackgroundSink: a ByteSink that writes to another sink on a thread of its
// own, so that whoever writes (the dump graph's serial write stage, often one
// of two threads on a small machine) goes on encoding while the kernel
// copies the stream into the page cache. Writing a file costs about as much
// CPU as coding fp32 weights (page cache pages are allocated and filled):
// with it on the caller's thread, `pack -j 1` ran a third slower.
//
// Write() copies into one of two buffers; a full buffer goes to the thread
// while the other fills, and Write() waits only when both are taken.
// WriteBorrowed() copies nothing: the thread writes the caller's bytes
// themselves, after whatever was written before them, and releases the
// ticket when done (the dump graph lends it chunk payloads in the slots
// they were coded into, and takes each slot back once released).
//
// The inner sink's first error comes back from the next Write() that hands a
// buffer over, from the next WriteBorrowed(), or from Commit(), and every
// later hand-over fails with it; once it failed, the thread writes nothing
// more and releases what it is lent at once. Commit() waits until everything
// is written, then commits the inner sink. Destroyed without a successful
// Commit(), it stops its thread (after the write in progress) and destroys
// the inner sink uncommitted, which leaves nothing complete-looking behind.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>  // std::jthread
#include <vector>

#include "transport/core/byte_stream.h"

namespace vramflow {

class BackgroundSink final : public ByteSink {
 public:
  // Holds 2 x `buffer_bytes` (at least 4 KiB each).
  BackgroundSink(std::unique_ptr<ByteSink> inner, size_t buffer_bytes);
  ~BackgroundSink() override;
  BackgroundSink(const BackgroundSink&) = delete;
  BackgroundSink& operator=(const BackgroundSink&) = delete;

  Status Write(std::span<const uint8_t> data) override;
  Result<uint64_t> WriteBorrowed(std::span<const uint8_t> data) override;
  bool Released(uint64_t ticket) override;
  void WaitReleased(uint64_t ticket) override;
  void DropBorrowed() override;
  Status Commit() override;
  std::string Describe() const override { return description_; }
  bool Seekable() const override { return seekable_; }

 private:
  // What the thread writes next: a buffer of copied bytes (ticket 0), or
  // bytes lent under `ticket`.
  struct Piece {
    std::vector<uint8_t> copied;
    std::span<const uint8_t> lent;
    uint64_t ticket = 0;
  };

  void Run();
  // Queues the filling buffer for the thread and takes the spare one,
  // waiting for it to be written first; fails with the thread's error.
  Status Hand();

  const std::unique_ptr<ByteSink> inner_;
  const std::string description_;
  const bool seekable_;
  std::vector<uint8_t> filling_;  // the caller's; capacity: the buffer size
  uint64_t last_ticket_ = 0;      // the caller's: the last one handed out

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> queue_;      // for the thread, oldest first
  std::vector<uint8_t> spare_;   // the other buffer, while neither queued nor written
  bool spare_free_ = true;       // false while the other buffer is queued or written
  bool writing_ = false;         // the thread holds a piece
  uint64_t writing_ticket_ = 0;  // its ticket, if lent
  uint64_t released_ = 0;        // every ticket up to this one is done
  bool stopping_ = false;
  Status error_;         // the inner sink's first error
  std::jthread thread_;  // last: started once the rest is built, joined first
};

}  // namespace vramflow
