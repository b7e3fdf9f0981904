// SPDX-License-Identifier: MIT
#include "transport/core/range_reader.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <future>

namespace vramflow {
namespace {

struct Piece {
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
};

class RangeReader final : public ByteSource {
 public:
  RangeReader(std::shared_ptr<RandomAccessSource> source, std::vector<ByteRange> ranges,
              const RangeReaderOptions& options)
      : source_(std::move(source)),
        ranges_(std::move(ranges)),
        budget_(options.memory_budget),
        request_size_(std::max<uint64_t>(1, options.request_size)),
        concurrency_(std::max(1u, options.concurrency)) {
    std::erase_if(ranges_, [](const ByteRange& r) { return r.size == 0; });
  }

  ~RangeReader() override {
    cancel_ = true;
    for (Pending& p : pending_) (void)p.piece.wait();  // cancelled; the outcome no longer matters
  }

  Result<size_t> Read(std::span<uint8_t> data) override {
    if (!failed_.ok()) return failed_;
    while (position_ == current_.size) {
      held_ -= current_.size;
      current_ = Piece{};
      position_ = 0;
      Launch();
      if (pending_.empty()) return size_t{0};  // every range read
      Result<Piece> piece = pending_.front().piece.get();
      pending_.pop_front();
      if (!piece.ok()) {
        failed_ = piece.status();
        return failed_;
      }
      current_ = std::move(*piece);
    }
    Launch();
    size_t n = std::min(data.size(), current_.size - position_);
    std::memcpy(data.data(), current_.data.get() + position_, n);
    position_ += n;
    return n;
  }

  std::string Describe() const override { return source_->Describe(); }

 private:
  struct Pending {
    std::future<Result<Piece>> piece;
  };

  // The next piece to request, without taking it; false when none is left.
  bool PeekPiece(ByteRange* piece) const {
    if (next_range_ == ranges_.size()) return false;
    const ByteRange& r = ranges_[next_range_];
    piece->offset = r.offset + next_in_range_;
    piece->size = std::min(request_size_, r.size - next_in_range_);
    return true;
  }

  void TakePiece(uint64_t size) {
    next_in_range_ += size;
    if (next_in_range_ == ranges_[next_range_].size) {
      ++next_range_;
      next_in_range_ = 0;
    }
  }

  // Requests pieces while the concurrency and the budget allow.
  void Launch() {
    ByteRange piece;
    while (pending_.size() < concurrency_ && PeekPiece(&piece)) {
      const bool idle = pending_.empty() && current_.size == 0;
      if (!idle && held_ + piece.size > budget_) break;
      TakePiece(piece.size);
      held_ += piece.size;
      pending_.push_back(Pending{std::async(std::launch::async, [source = source_.get(), piece, cancel = &cancel_] {
        return Fetch(*source, piece, *cancel);
      })});
    }
  }

  static Result<Piece> Fetch(RandomAccessSource& source, ByteRange range, const std::atomic<bool>& cancel) {
    Piece piece;
    piece.size = static_cast<size_t>(range.size);
    piece.data.reset(new uint8_t[piece.size]);
    VF_ASSIGN_OR_RETURN(size_t n, source.ReadAtUnlessCancelled(range.offset, {piece.data.get(), piece.size}, cancel));
    if (n != piece.size)
      return Status::Truncated(source.Describe() + ": bytes " + std::to_string(range.offset) + "-" +
                               std::to_string(range.offset + range.size - 1) + " run past its end (" +
                               std::to_string(source.Size()) + " bytes)");
    return piece;
  }

  std::shared_ptr<RandomAccessSource> source_;
  std::vector<ByteRange> ranges_;
  const uint64_t budget_;
  const uint64_t request_size_;
  const size_t concurrency_;
  size_t next_range_ = 0;       // the range the next piece comes from
  uint64_t next_in_range_ = 0;  // and where in it
  std::atomic<bool> cancel_{false};
  std::deque<Pending> pending_;
  uint64_t held_ = 0;  // bytes of the pending pieces and the current one
  Piece current_;
  size_t position_ = 0;  // consumed bytes of current_
  Status failed_;
};

}  // namespace

std::unique_ptr<ByteSource> NewRangeReader(std::shared_ptr<RandomAccessSource> source, std::vector<ByteRange> ranges,
                                           const RangeReaderOptions& options) {
  return std::make_unique<RangeReader>(std::move(source), std::move(ranges), options);
}

}  // namespace vramflow
