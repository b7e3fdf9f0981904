// SPDX-License-Identifier: MIT
// ParallelWrites: a regular file's writes spread over several threads, each
// piece at its own place in the file (pwritev), for a file sink
// (FileSinkOptions::writer_threads).
//
// Whoever writes a stream frames it on one thread: the dump graph's ordered
// write stage. Written there, every payload's copy into the page cache is a
// serial cost, and on a many-core machine that one thread caps the dump
// (`bench pipeline`'s serial stages: about 0.15 CPU-s per GiB on tmpfs,
// under 7 GB/s). Here the caller only copies the small bytes (frame headers,
// index blocks) and hands lent payloads over with their offsets; the
// threads write the pieces in any order, and a ticket is released once it
// and everything before it is in the file.
//
// The first error of a write comes back from the next Write(),
// WriteBorrowed() or Flush(), and nothing more is written after it.
// Destroyed, it stops its threads after the writes in progress, leaving
// what was queued unwritten. Not thread-safe for its caller; one caller.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace vramflow {

class ParallelWrites {
 public:
  // `fd` (borrowed, kept open by the caller) is written from offset 0;
  // `written` is called with each growth of the prefix of the file that is
  // complete (for its WritebackWindow), from one thread at a time.
  static Result<std::unique_ptr<ParallelWrites>> Start(int fd, unsigned threads, std::string description,
                                                       std::function<void(uint64_t)> written);
  ~ParallelWrites();
  ParallelWrites(const ParallelWrites&) = delete;
  ParallelWrites& operator=(const ParallelWrites&) = delete;

  // ByteSink's Write, WriteBorrowed, Released, WaitReleased and DropBorrowed
  // (transport/core/byte_stream.h).
  Status Write(std::span<const uint8_t> data);
  Result<uint64_t> WriteBorrowed(std::span<const uint8_t> data);
  bool Released(uint64_t ticket);
  void WaitReleased(uint64_t ticket);
  void DropBorrowed();
  // Hands over what is still copied and waits until every piece is
  // written and reported to `written`; the first error, if any.
  Status Flush();

 private:
  // A piece of the file: copied bytes, then lent ones, from `offset`.
  struct Piece {
    uint64_t seq = 0;
    uint64_t offset = 0;
    std::vector<uint8_t> copied;
    std::span<const uint8_t> lent;
  };

  ParallelWrites(int fd, std::string description, std::function<void(uint64_t)> written)
      : fd_(fd), description_(std::move(description)), written_(std::move(written)) {}
  void Run();
  Status WritePiece(const Piece& piece) const;
  // Queues the copied bytes with `lent` after them; returns the piece's seq.
  Result<uint64_t> Hand(std::span<const uint8_t> lent);
  void Done(const Piece& piece);  // with mutex_ held

  const int fd_;
  const std::string description_;
  const std::function<void(uint64_t)> written_;
  std::vector<uint8_t> copied_;  // the caller's: bytes not yet handed over
  uint64_t end_ = 0;             // the caller's: the offset after everything handed over and copied_
  uint64_t last_seq_ = 0;        // the caller's

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, Piece> queue_;    // by seq, for the threads
  std::map<uint64_t, uint64_t> done_;  // seq -> end offset of pieces written past released_
  uint64_t released_ = 0;              // every piece up to this seq is in the file
  uint64_t released_end_ = 0;          // ... and so is every byte before this offset
  uint64_t queued_copied_ = 0;         // copied bytes queued or being written
  std::map<uint64_t, bool> writing_;   // seqs being written (true: lent)
  bool stopping_ = false;
  Status error_;
  unsigned reporting_ = 0;            // calls of written_ under way
  std::mutex written_mutex_;          // one call of written_ at a time
  std::vector<std::thread> threads_;  // joined by the destructor
};

}  // namespace vramflow
