// SPDX-License-Identifier: MIT
#include "transport/core/background_sink.h"

#include <algorithm>
#include <utility>

namespace vramflow {

BackgroundSink::BackgroundSink(std::unique_ptr<ByteSink> inner, size_t buffer_bytes)
    : inner_(std::move(inner)), description_(inner_->Describe()), seekable_(inner_->Seekable()) {
  const size_t size = std::max<size_t>(buffer_bytes, 4096);
  filling_.reserve(size);
  spare_.reserve(size);
  thread_ = std::jthread([this] { Run(); });
}

BackgroundSink::~BackgroundSink() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  // thread_, the last member, is joined first; then inner_ goes, uncommitted
  // unless Commit() succeeded.
}

void BackgroundSink::Run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_) return;  // what is still queued is not written (lent bytes may be gone)
    Piece piece = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    writing_ticket_ = piece.ticket;
    const bool failed = !error_.ok();
    lock.unlock();
    Status s =
        failed ? Status::Ok() : inner_->Write(piece.ticket ? piece.lent : std::span<const uint8_t>(piece.copied));
    lock.lock();
    if (!s.ok() && error_.ok()) error_ = std::move(s);
    if (piece.ticket) {
      released_ = piece.ticket;
    } else {
      piece.copied.clear();
      spare_ = std::move(piece.copied);
      spare_free_ = true;
    }
    writing_ = false;
    writing_ticket_ = 0;
    changed_.notify_all();
  }
}

Status BackgroundSink::Hand() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return spare_free_; });
  VF_RETURN_IF_ERROR(error_);
  if (filling_.empty()) return Status::Ok();
  queue_.push_back(Piece{std::move(filling_), {}, 0});
  filling_ = std::move(spare_);
  spare_free_ = false;
  changed_.notify_all();
  return Status::Ok();
}

Status BackgroundSink::Write(std::span<const uint8_t> data) {
  while (!data.empty()) {
    if (filling_.size() == filling_.capacity()) VF_RETURN_IF_ERROR(Hand());
    const size_t n = std::min(data.size(), filling_.capacity() - filling_.size());
    filling_.insert(filling_.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(n));
    data = data.subspan(n);
  }
  return Status::Ok();
}

Result<uint64_t> BackgroundSink::WriteBorrowed(std::span<const uint8_t> data) {
  if (data.empty()) return uint64_t{0};
  if (!filling_.empty()) VF_RETURN_IF_ERROR(Hand());  // the bytes before these go first
  std::lock_guard lock(mutex_);
  VF_RETURN_IF_ERROR(error_);
  queue_.push_back(Piece{{}, data, ++last_ticket_});
  changed_.notify_all();
  return last_ticket_;
}

bool BackgroundSink::Released(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  return released_ >= ticket;
}

void BackgroundSink::WaitReleased(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return released_ >= ticket; });
}

void BackgroundSink::DropBorrowed() {
  std::unique_lock lock(mutex_);
  const size_t queued = queue_.size();
  std::erase_if(queue_, [](const Piece& piece) { return piece.ticket != 0; });
  if (queue_.size() != queued && error_.ok())
    error_ = Status::Cancelled("writing " + description_ + " stopped before the end of the stream");
  changed_.wait(lock, [&] { return writing_ticket_ == 0; });
  released_ = last_ticket_;
  changed_.notify_all();
}

Status BackgroundSink::Commit() {
  VF_RETURN_IF_ERROR(Hand());
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !writing_; });
    VF_RETURN_IF_ERROR(error_);
  }
  return inner_->Commit();
}

}  // namespace vramflow
