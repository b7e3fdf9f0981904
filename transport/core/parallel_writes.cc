// SPDX-License-Identifier: MIT
#include "transport/core/parallel_writes.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/thread_start.h"

namespace vramflow {
namespace {

// Copied bytes handed over as a piece of their own once this many wait
// (index blocks), and the most that may be queued before Write() waits.
constexpr size_t kCopiedPiece = 256 << 10;
constexpr uint64_t kMaxQueuedCopied = 8ull << 20;

}  // namespace

Result<std::unique_ptr<ParallelWrites>> ParallelWrites::Start(int fd, unsigned threads, std::string description,
                                                              std::function<void(uint64_t)> written) {
  std::unique_ptr<ParallelWrites> w(new ParallelWrites(fd, std::move(description), std::move(written)));
  for (unsigned i = 0; i < std::max(1u, threads); ++i) {
    std::thread t;
    VF_RETURN_IF_ERROR(StartThread(&t, "writing " + w->description_, [p = w.get()] { p->Run(); }));
    w->threads_.emplace_back(std::move(t));
  }
  return w;
}

ParallelWrites::~ParallelWrites() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();  // after the writes in progress
}

Status ParallelWrites::WritePiece(const Piece& piece) const {
  iovec parts[2] = {{const_cast<uint8_t*>(piece.copied.data()), piece.copied.size()},
                    {const_cast<uint8_t*>(piece.lent.data()), piece.lent.size()}};
  uint64_t offset = piece.offset;
  int first = 0;
  while (first < 2) {
    if (parts[first].iov_len == 0) {
      ++first;
      continue;
    }
    const ssize_t n = ::pwritev(fd_, parts + first, 2 - first, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing " + description_ + " at offset " + std::to_string(offset), errno);
    }
    offset += static_cast<uint64_t>(n);
    for (size_t left = static_cast<size_t>(n); left > 0 && first < 2;) {
      const size_t step = std::min(left, parts[first].iov_len);
      parts[first].iov_base = static_cast<uint8_t*>(parts[first].iov_base) + step;
      parts[first].iov_len -= step;
      left -= step;
      if (parts[first].iov_len == 0) ++first;
    }
  }
  return Status::Ok();
}

void ParallelWrites::Run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_) return;
    Piece piece = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    writing_[piece.seq] = !piece.lent.empty();
    const bool failed = !error_.ok();
    lock.unlock();
    Status s = failed ? Status::Ok() : WritePiece(piece);
    lock.lock();
    if (!s.ok() && error_.ok()) error_ = std::move(s);
    writing_.erase(piece.seq);
    Done(piece);
  }
}

void ParallelWrites::Done(const Piece& piece) {
  queued_copied_ -= piece.copied.size();
  done_[piece.seq] = piece.offset + piece.copied.size() + piece.lent.size();
  const uint64_t before = released_end_;
  for (auto it = done_.begin(); it != done_.end() && it->first == released_ + 1; it = done_.erase(it)) {
    released_ = it->first;
    released_end_ = it->second;
  }
  changed_.notify_all();
  if (released_end_ == before || !written_ || !error_.ok()) return;
  // The file's complete prefix grew: tell its writeback window, outside
  // this lock but one call at a time. The growth is taken now: another
  // thread may move released_end_ on while this one waits.
  const uint64_t grown = released_end_ - before;
  ++reporting_;
  mutex_.unlock();
  {
    std::lock_guard written_lock(written_mutex_);
    written_(grown);
  }
  mutex_.lock();
  --reporting_;
  changed_.notify_all();
}

Result<uint64_t> ParallelWrites::Hand(std::span<const uint8_t> lent) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queued_copied_ < kMaxQueuedCopied || !error_.ok(); });
  VF_RETURN_IF_ERROR(error_);
  Piece piece{++last_seq_, end_ - copied_.size(), std::move(copied_), lent};
  end_ += lent.size();
  copied_ = {};
  queued_copied_ += piece.copied.size();
  const uint64_t seq = piece.seq;
  queue_.emplace(seq, std::move(piece));
  changed_.notify_all();
  return seq;
}

Status ParallelWrites::Write(std::span<const uint8_t> data) {
  copied_.insert(copied_.end(), data.begin(), data.end());
  end_ += data.size();
  if (copied_.size() >= kCopiedPiece) return Hand({}).status();
  std::lock_guard lock(mutex_);
  return error_;
}

Result<uint64_t> ParallelWrites::WriteBorrowed(std::span<const uint8_t> data) {
  if (data.empty()) return uint64_t{0};
  return Hand(data);
}

bool ParallelWrites::Released(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  return released_ >= ticket;
}

void ParallelWrites::WaitReleased(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return released_ >= ticket; });
}

void ParallelWrites::DropBorrowed() {
  std::unique_lock lock(mutex_);
  const bool lent_queued =
      std::any_of(queue_.begin(), queue_.end(), [](const auto& q) { return !q.second.lent.empty(); });
  // Failed first: the threads write nothing more, and Done() lets go of no lock.
  if (lent_queued && error_.ok())
    error_ = Status::Cancelled("writing " + description_ + " stopped before the end of the stream");
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->second.lent.empty()) {
      ++it;
      continue;
    }
    Piece piece = std::move(it->second);
    it = queue_.erase(it);
    Done(piece);  // released without its bytes
  }
  // The lent bytes being written, and any copied piece before a ticket.
  changed_.wait(lock, [&] { return released_ == last_seq_; });
}

Status ParallelWrites::Flush() {
  if (!copied_.empty()) VF_RETURN_IF_ERROR(Hand({}).status());
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return released_ == last_seq_ && reporting_ == 0; });
  return error_;
}

}  // namespace vramflow
