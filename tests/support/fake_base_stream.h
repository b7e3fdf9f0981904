// SPDX-License-Identifier: MIT
// Tests only: a BaseStream over a full stream held in memory and the
// objects' bytes, so that the dump side of incremental streams can be tested
// on its own. The index is the stream's own (ReadSeekIndex); ReadChunk copies
// the bytes it was given and counts its calls. And ForwardingBaseStream, a
// BaseStream that passes every call on to another: a test overrides the call
// it changes, as ConcurrencyProbe does to see reads overlap.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "streamer/format/base_stream.h"
#include "transport/core/memory_stream.h"

namespace vramflow::testing {

class FakeBaseStream final : public BaseStream {
 public:
  // `stream`: a full stored stream with an index; `bytes`: each object's
  // bytes by name; `digests`: whether StoredDigest answers.
  static Result<std::shared_ptr<FakeBaseStream>> Create(std::vector<uint8_t> stream,
                                                        std::map<std::string, std::vector<uint8_t>> bytes,
                                                        bool digests) {
    auto base = std::shared_ptr<FakeBaseStream>(new FakeBaseStream());
    MemoryRandomAccess source(stream);
    VF_ASSIGN_OR_RETURN(base->index_, ReadSeekIndex(source));
    base->id_ = Sha256(stream.data(), stream.size());
    base->size_ = stream.size();
    base->bytes_ = std::move(bytes);
    base->digests_ = digests;
    return base;
  }

  const StreamId& id() const override { return id_; }
  BaseDescriptor DescriptorForDependent() const override {
    return BaseDescriptor{id_, size_, index_.totals.raw_bytes, 1, "fake-base"};
  }
  const StoredStreamIndex& index() const override { return index_; }
  bool has_digests() const override { return digests_; }

  const SeekIndexObject* Match(const ObjectMetadata& metadata, uint64_t size,
                               std::optional<uint32_t> gpu_ordinal) const override {
    std::vector<std::string> gpus;  // gpu-id values in order of first appearance
    for (const SeekIndexObject& o : index_.index.objects) {
      const std::string* gpu = Attribute(o.metadata, "gpu-id");
      const std::string* va = Attribute(o.metadata, "gpu-va");
      if (!gpu_ordinal) {
        if (o.metadata.name == metadata.name) return &o;
        continue;
      }
      if (!gpu || !va) continue;
      auto at = std::find(gpus.begin(), gpus.end(), *gpu);
      if (at == gpus.end()) at = gpus.insert(gpus.end(), *gpu);
      const std::string* new_va = Attribute(metadata, "gpu-va");
      if (static_cast<uint32_t>(at - gpus.begin()) == *gpu_ordinal && new_va && *new_va == *va && o.size == size)
        return &o;
    }
    return nullptr;
  }

  const SeekIndexChunk* ChunkAt(uint32_t object_id, uint64_t offset, uint64_t size) const override {
    const SeekIndexObject* o = index_.index.Find(object_id);
    if (!o) return nullptr;
    for (const SeekIndexChunk& c : o->chunks)
      if (c.object_offset == offset && c.raw_size == size && c.kind != FrameKind::kZeroRun) return &c;
    return nullptr;
  }

  std::optional<Sha256Digest> StoredDigest(uint32_t object_id, uint64_t offset) const override {
    if (!digests_) return std::nullopt;
    const SeekIndexObject* o = index_.index.Find(object_id);
    if (!o) return std::nullopt;
    for (const SeekIndexChunk& c : o->chunks)
      if (c.object_offset == offset) return Sha256(Bytes(*o).data() + offset, c.raw_size);
    return std::nullopt;
  }

  Status ReadChunk(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch&,
                   const Sha256Digest* sha256) const override {
    ++chunk_reads;
    const SeekIndexChunk* c = ChunkAt(object_id, offset, out.size());
    if (!c) return Status::InvalidArgument("no such base chunk");
    const std::vector<uint8_t>& bytes = Bytes(*index_.index.Find(object_id));
    std::memcpy(out.data(), bytes.data() + offset, out.size());
    if (sha256 && Sha256(out.data(), out.size()) != *sha256) return Status::Corruption("base chunk digest");
    return Status::Ok();
  }

  uint64_t memory_bytes() const override { return memory_bytes_; }
  unsigned concurrent_reads() const override { return 1; }
  void set_memory_bytes(uint64_t bytes) { memory_bytes_ = bytes; }

  // The bytes of base object `id` (for checking what a stream refers to).
  const std::vector<uint8_t>& Bytes(uint32_t id) const { return Bytes(*index_.index.Find(id)); }

  mutable std::atomic<uint64_t> chunk_reads{0};

 private:
  FakeBaseStream() = default;
  static const std::string* Attribute(const ObjectMetadata& m, const std::string& key) {
    for (const auto& [k, v] : m.attributes)
      if (k == key) return &v;
    return nullptr;
  }
  const std::vector<uint8_t>& Bytes(const SeekIndexObject& o) const { return bytes_.at(o.metadata.name); }

  StoredStreamIndex index_;
  StreamId id_{};
  uint64_t size_ = 0;
  std::map<std::string, std::vector<uint8_t>> bytes_;
  bool digests_ = false;
  uint64_t memory_bytes_ = 4096;
};

class ForwardingBaseStream : public BaseStream {
 public:
  explicit ForwardingBaseStream(std::shared_ptr<const BaseStream> inner) : inner_(std::move(inner)) {}
  const StreamId& id() const override { return inner_->id(); }
  BaseDescriptor DescriptorForDependent() const override { return inner_->DescriptorForDependent(); }
  const StoredStreamIndex& index() const override { return inner_->index(); }
  bool has_digests() const override { return inner_->has_digests(); }
  const SeekIndexObject* Match(const ObjectMetadata& metadata, uint64_t size,
                               std::optional<uint32_t> gpu_ordinal) const override {
    return inner_->Match(metadata, size, gpu_ordinal);
  }
  const SeekIndexChunk* ChunkAt(uint32_t object_id, uint64_t offset, uint64_t size) const override {
    return inner_->ChunkAt(object_id, offset, size);
  }
  std::optional<Sha256Digest> StoredDigest(uint32_t object_id, uint64_t offset) const override {
    return inner_->StoredDigest(object_id, offset);
  }
  Status ReadChunk(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch& scratch,
                   const Sha256Digest* sha256) const override {
    return inner_->ReadChunk(object_id, offset, out, scratch, sha256);
  }
  uint64_t memory_bytes() const override { return inner_->memory_bytes(); }
  unsigned concurrent_reads() const override { return inner_->concurrent_reads(); }

 private:
  std::shared_ptr<const BaseStream> inner_;
};

// A base that lets a ReadChunk call through only once `overlap` are in
// progress at once (or after `wait`): shows whether a reader resolves base
// frames on that many threads at once. It asks for `concurrent_reads` in
// flight, as a base on S3 does.
class ConcurrencyProbe final : public ForwardingBaseStream {
 public:
  ConcurrencyProbe(std::shared_ptr<const BaseStream> inner, std::chrono::milliseconds wait,
                   unsigned concurrent_reads = 1, int overlap = 2)
      : ForwardingBaseStream(std::move(inner)), wait_(wait), concurrent_reads_(concurrent_reads), overlap_(overlap) {}
  unsigned concurrent_reads() const override { return concurrent_reads_; }
  Status ReadChunk(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch& scratch,
                   const Sha256Digest* sha256) const override {
    {
      std::unique_lock lock(mu_);
      most_ = std::max(most_, ++inside_);
      cv_.notify_all();
      cv_.wait_for(lock, wait_, [&] { return most_ >= overlap_; });
    }
    Status s = ForwardingBaseStream::ReadChunk(object_id, offset, out, scratch, sha256);
    std::lock_guard lock(mu_);
    --inside_;
    return s;
  }
  int most() const {
    std::lock_guard lock(mu_);
    return most_;
  }

 private:
  const std::chrono::milliseconds wait_;
  const unsigned concurrent_reads_;
  const int overlap_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int inside_ = 0;  // guarded by mu_
  mutable int most_ = 0;    // guarded by mu_
};

}  // namespace vramflow::testing
