// SPDX-License-Identifier: MIT
#include "streamer/format/verified_copy.h"

#include "common/progress.h"
#include "streamer/format/stream_reader.h"

namespace vramflow {
namespace {

// Hands every byte the reader takes from `source` on to `sink` as well.
class TeeSource final : public ByteSource {
 public:
  TeeSource(ByteSource* source, ByteSink* sink, ProgressBar* bar, uint64_t* bytes)
      : source_(source), sink_(sink), bar_(bar), bytes_(bytes) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    VF_ASSIGN_OR_RETURN(size_t n, source_->Read(data));
    if (n == 0) return n;
    sink_status_ = sink_->Write(data.first(n));
    VF_RETURN_IF_ERROR(sink_status_);
    *bytes_ += n;
    bar_->Update(*bytes_);
    return n;
  }
  std::string Describe() const override { return source_->Describe(); }
  // The sink's error, if writing to it is what stopped the reader.
  const Status& sink_status() const { return sink_status_; }

 private:
  ByteSource* source_;
  ByteSink* sink_;
  ProgressBar* bar_;
  uint64_t* bytes_;
  Status sink_status_;
};

}  // namespace

Status CopyVerifiedStream(ByteSource& source, ByteSink& sink, const std::string& label, ProgressStyle progress,
                          uint64_t max_memory, uint64_t* bytes, const OpenBaseFn& open_base) {
  ProgressBar bar(label, 0, progress);
  TeeSource tee(&source, &sink, &bar, bytes);
  StreamVisitor checks_only;  // the reader's own checks are the verdict
  MemoryBudget budget(max_memory);
  Status verdict = ReadStream(tee, checks_only, ReadOptions{.decode = true, .budget = &budget, .open_base = open_base});
  if (!tee.sink_status().ok()) return tee.sink_status();
  if (!verdict.ok())
    return verdict.WithContext("the stream from " + source.Describe() + " is not a complete, valid vramflow stream; " +
                               sink.Describe() + " was not stored");
  return sink.Commit();
}

}  // namespace vramflow
