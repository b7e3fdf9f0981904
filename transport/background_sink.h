// SPDX-License-Identifier: MIT
// BackgroundSink: a ByteSink that writes to another sink on a thread of its
// own, so that whoever writes (the dump graph's serial write stage, often one
// of two threads on a small machine) goes on encoding while the kernel
// copies the stream into the page cache. Writing a file costs about as much
// CPU as coding fp32 weights (page cache pages are allocated and filled):
// with it on the caller's thread, `pack -j 1` ran a third slower.
//
// Write() copies into one of two buffers; a full buffer goes to the thread
// while the other fills, and Write() waits only when both are taken. The
// inner sink's first error comes back from the next Write() that hands a
// buffer over, or from Commit(), and every later hand-over fails with it.
// Commit() waits until everything is written, then commits the inner sink.
// Destroyed without a successful Commit(), it stops its thread (after the
// write in progress) and destroys the inner sink uncommitted, which leaves
// nothing complete-looking behind.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>  // std::jthread
#include <vector>

#include "transport/byte_stream.h"

namespace vramflow {

class BackgroundSink final : public ByteSink {
 public:
  // Holds 2 x `buffer_bytes` (at least 4 KiB each).
  BackgroundSink(std::unique_ptr<ByteSink> inner, size_t buffer_bytes);
  ~BackgroundSink() override;
  BackgroundSink(const BackgroundSink&) = delete;
  BackgroundSink& operator=(const BackgroundSink&) = delete;

  Status Write(std::span<const uint8_t> data) override;
  Status Commit() override;
  std::string Describe() const override { return description_; }
  bool Seekable() const override { return seekable_; }

 private:
  void Run();
  // Hands the filling buffer to the thread, waiting for the other one to be
  // written first; fails with the thread's error.
  Status Hand();

  const std::unique_ptr<ByteSink> inner_;
  const std::string description_;
  const bool seekable_;
  std::vector<uint8_t> filling_;  // the caller's; capacity: the buffer size

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint8_t> handed_;  // the thread's while `busy_`
  bool busy_ = false;
  bool stopping_ = false;
  Status error_;  // the inner sink's first error
  std::jthread thread_;  // last: started once the rest is built, joined first
};

}  // namespace vramflow
