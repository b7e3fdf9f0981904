// SPDX-License-Identifier: MIT
#include "transport/background_sink.h"

#include <algorithm>
#include <utility>

namespace vramflow {

BackgroundSink::BackgroundSink(std::unique_ptr<ByteSink> inner, size_t buffer_bytes)
    : inner_(std::move(inner)), description_(inner_->Describe()), seekable_(inner_->Seekable()) {
  const size_t size = std::max<size_t>(buffer_bytes, 4096);
  filling_.reserve(size);
  handed_.reserve(size);
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
    changed_.wait(lock, [&] { return busy_ || stopping_; });
    if (!busy_) return;  // stopping, nothing handed
    lock.unlock();
    Status s = inner_->Write(handed_);
    lock.lock();
    if (!s.ok() && error_.ok()) error_ = std::move(s);
    handed_.clear();
    busy_ = false;
    changed_.notify_all();
    if (stopping_) return;
  }
}

Status BackgroundSink::Hand() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !busy_; });
  VF_RETURN_IF_ERROR(error_);
  if (filling_.empty()) return Status::Ok();
  std::swap(filling_, handed_);
  busy_ = true;
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

Status BackgroundSink::Commit() {
  VF_RETURN_IF_ERROR(Hand());
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    VF_RETURN_IF_ERROR(error_);
  }
  return inner_->Commit();
}

}  // namespace vramflow
