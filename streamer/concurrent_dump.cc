// SPDX-License-Identifier: MIT
#include "streamer/concurrent_dump.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "codecs/chunk_codec.h"
#include "common/exception_boundary.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/base_chunk_coding.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/ordered_dump_plan.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {
namespace {

// How long a reader waits for its input before it looks again at whether
// the dump failed or another reader waits for a buffer.
constexpr int kPollMillis = 20;

// One chunk in flight with its buffers.
struct Item {
  size_t object = 0;
  uint64_t seq = 0;  // the chunk's place in its object
  uint64_t offset = 0;
  size_t size = 0;
  BudgetedBuffer raw;
  BudgetedBuffer payload;
  EncodedChunk encoded;
  // With dedup, a DATA chunk's content key (XXH3-128 of its raw bytes).
  bool keyed = false;
  Hash128 content;
  // With a base: how the chunk is stored (a BASE_DELTA's coding is in
  // `encoded`, its payload in `payload`), and the chunk's SHA-256.
  BaseCoding::Kind coding = BaseCoding::Kind::kOwn;
  BaseChunkRef base_ref;
  bool has_sha256 = false;
  Sha256Digest sha256{};
};

// An earlier DATA frame a reference may name.
struct FirstCopy {
  DedupRef ref;
  uint64_t size = 0;
};

// The window's key for a chunk's content within one object. Objects are
// written interleaved, so keyed by content alone the same bytes in another
// object would take the entry over and hide this object's own first copy.
// (A mixed key that matches another object's entry is still refused by the
// object check where it is looked up.)
Hash128 InObject(uint32_t object_id, const Hash128& content) {
  return Hash128{content.low ^ (uint64_t{object_id} * 0x9E3779B97F4A7C15ull), content.high ^ object_id};
}

EncoderOptions RawEncoder() {
  EncoderOptions raw;
  raw.codec = CodecChoice::kRaw;
  raw.transform = TransformChoice::kNone;
  raw.detect_zero_runs = false;
  return raw;
}

}  // namespace

class ConcurrentDump::Engine {
 public:
  Engine(ByteSink* sink, PipelineOptions options, size_t max_open_inputs)
      : sink_(sink),
        options_(std::move(options)),
        digests_(options_.chunk_digests || options_.base != nullptr),
        max_open_inputs_(max_open_inputs),
        budget_(options_.max_memory) {}

  ~Engine() {
    Abort(Status::Cancelled("the dump was stopped"));
    JoinAll();
  }

  Status Start() {
    start_ = std::chrono::steady_clock::now();
    // Two buffers per thread as the sequential dump, and a few more: several
    // inputs may each hold a partly filled one.
    if (options_.dedup) {
      // As the dump graph's window, charged first: the chunk buffers take
      // what is left.
      const uint64_t window = options_.dedup_window ? options_.dedup_window : DefaultDedupWindow(options_.max_memory);
      if (window > kMaxDedupWindow)
        return Status::InvalidArgument("dedup window of " + std::to_string(window) +
                                       " chunks is more than the format's " + std::to_string(kMaxDedupWindow));
      VF_RETURN_IF_ERROR(
          budget_.Charge(window * kDedupWindowEntryBytes, "dedup window of " + std::to_string(window) + " chunks"));
      first_copies_.emplace(static_cast<uint32_t>(window));
    }
    VF_RETURN_IF_ERROR(CheckDumpBase(options_));
    // With a base: its index, held throughout, and each worker's buffers for
    // reading and XORing base chunks (charged by the plan for the workers it
    // runs, then taken by their coders). A worker coding against a base on
    // S3 waits for its chunk: as many workers as the base asks to keep reads
    // in flight.
    const uint64_t coder_bytes =
        options_.base ? BaseChunkCoder::MemoryBytes(*options_.base, options_.chunk_size, options_.base_refs_only) : 0;
    if (options_.base) VF_RETURN_IF_ERROR(budget_.Charge(options_.base->memory_bytes(), "the base's index"));
    const unsigned wanted_threads = ThreadsWithBaseReads(options_.threads, options_.base.get(), true);
    VF_ASSIGN_OR_RETURN(plan_,
                        PlanOrderedDump(options_, wanted_threads, coder_bytes, 2ull * wanted_threads + 6, &budget_));
    for (size_t i = 0; i < plan_.items; ++i) {
      auto item = std::make_unique<Item>();
      VF_ASSIGN_OR_RETURN(item->raw, BudgetedBuffer::Allocate(&budget_, options_.chunk_size, "chunk buffer"));
      VF_ASSIGN_OR_RETURN(
          item->payload,
          BudgetedBuffer::Allocate(&budget_, ChunkEncoder::MaxPayloadSize(options_.chunk_size), "payload buffer"));
      free_.push_back(item.get());
      items_.push_back(std::move(item));
    }
    if (options_.base) {
      budget_.Refund(uint64_t{plan_.threads} * coder_bytes);
      for (unsigned i = 0; i < plan_.threads; ++i) {
        VF_ASSIGN_OR_RETURN(
            std::unique_ptr<BaseChunkCoder> coder,
            BaseChunkCoder::Create(options_.base, options_.chunk_size, options_.base_refs_only, &budget_));
        coders_.push_back(std::move(coder));
      }
    }
    StreamHeader header = OrderedDumpHeader(options_, *sink_);
    if (first_copies_) {
      header.flags |= kStreamFlagDedup;
      header.dedup_window = first_copies_->capacity();
    }
    if (options_.base) header.flags |= kStreamFlagBase;
    writer_.emplace(sink_, header);
    if (options_.base) {
      BaseDescriptor descriptor = options_.base->DescriptorForDependent();
      if (!options_.base_location.empty()) descriptor.location = options_.base_location;
      writer_->SetBase(std::move(descriptor));
    }
    writer_->SetChunkDigests(digests_);
    VF_RETURN_IF_ERROR(writer_->Start());
    for (unsigned i = 0; i < plan_.threads; ++i)
      workers_.emplace_back([this, i] { Work(coders_.empty() ? nullptr : coders_[i].get()); });
    write_thread_ = std::thread([this] { WriteLoop(); });
    return Status::Ok();
  }

  Status Add(ConcurrentInput input) {
    JoinFinishedReaders();
    std::unique_lock<std::mutex> lock(mu_);
    if (!error_.ok()) return error_;
    if (closing_) return Status::InvalidArgument("input '" + input.metadata.name + "' added after the dump's end");
    if (reading_ >= max_open_inputs_) {
      FailLocked(Status::InvalidArgument("input '" + input.metadata.name + "' would be the " +
                                         std::to_string(reading_ + 1) + "th open at once; at most " +
                                         std::to_string(max_open_inputs_) + " may be"));
      return error_;
    }
    const size_t index = objects_.size();
    auto object = std::make_unique<Object>();
    object->metadata = input.metadata;
    // Matched by name (CRIU's image files, ext files), whatever their sizes.
    if (options_.base) object->base_object = options_.base->Match(input.metadata, kUnknownObjectSize, std::nullopt);
    objects_.push_back(std::move(object));
    open_.insert(index);
    writer_wake_.notify_one();
    Object* added = objects_.back().get();
    ++reading_;
    try {
      readers_.emplace(index, std::thread([this, index, added, in = std::move(input)]() mutable {
                         Read(index, added, std::move(in));
                       }));
    } catch (const std::exception& e) {
      FailLocked(Status::Internal("starting the reader of '" + added->metadata.name + "': " + e.what()));
      return error_;
    }
    return Status::Ok();
  }

  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  void Abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(why);
  }

  Status Drain(std::vector<ConcurrentObject>* objects) {
    // Every input ends (or the dump fails), then the writer writes the rest.
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    JoinReaders();
    {
      std::lock_guard<std::mutex> lock(mu_);
      writer_wake_.notify_all();
    }
    if (write_thread_.joinable()) write_thread_.join();
    StopWorkers();
    std::lock_guard<std::mutex> lock(mu_);
    VF_RETURN_IF_ERROR(error_);
    drained_ = true;
    objects->clear();
    for (const auto& object : objects_) objects->push_back(ConcurrentObject{object->metadata.name, object->size});
    return Status::Ok();
  }

  Status Finish(PipelineStats* stats) {
    if (!drained_) return Status::Internal("ConcurrentDump::Finish before Drain");
    const auto finish_began = std::chrono::steady_clock::now();
    VF_RETURN_IF_ERROR(writer_->Finish().WithContext("ending the stream on " + sink_->Describe()));
    write_seconds_ += SecondsSince(finish_began);
    if (stats)
      FillPipelineStats(WrittenStats(*writer_, objects_.size(), done_bytes_),
                        EngineFigures{.slots = plan_.items,
                                      .budget_peak = budget_.peak(),
                                      .threads = plan_.threads,
                                      .start = start_,
                                      .serial_seconds = write_seconds_},
                        stats);
    return Status::Ok();
  }

 private:
  struct Object {
    ObjectMetadata metadata;
    ChunkStorage storage = ChunkStorage::kEncoded;  // set before its first chunk is queued
    const SeekIndexObject* base_object = nullptr;   // the base's object of the same name, if any
    uint32_t stream_id = 0;
    bool begun = false;
    uint64_t next_seq = 0;                // the next chunk to write
    std::optional<uint64_t> chunk_count;  // known once the input ended
    std::map<uint64_t, Item*> encoded;    // chunks ready to write, by seq
    uint64_t size = 0;
  };

  void FailLocked(const Status& status) {
    if (status.ok() || !error_.ok()) return;
    error_ = status;
    free_wake_.notify_all();
    work_wake_.notify_all();
    writer_wake_.notify_all();
  }
  void Fail(const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(status);
  }
  bool Failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !error_.ok();
  }

  // A free buffer; waits (saying so, for readers holding part of a chunk)
  // until one is back. nullptr once the dump failed.
  Item* TakeFree() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_for_free_;
    free_wake_.wait(lock, [&] { return !error_.ok() || !free_.empty(); });
    --waiting_for_free_;
    if (!error_.ok()) return nullptr;
    Item* item = free_.back();
    free_.pop_back();
    return item;
  }
  void PutFree(Item* item) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(item);
    free_wake_.notify_one();
  }
  bool SomeoneWaitsForABuffer() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_for_free_ > 0;
  }

  enum class Wait { kReadable, kStarved, kStopped };

  // Waits until `fd` has bytes (or its end). kStopped when the dump failed
  // (or poll did: *error); kStarved, with `give_up_if_starved`, when another
  // reader waits for a buffer and the input has nothing right now.
  Wait WaitReadable(int fd, bool give_up_if_starved, Status* error) {
    while (true) {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, kPollMillis);
      if (n < 0 && errno != EINTR) {
        *error = Status::IoError(std::string("poll: ") + std::strerror(errno));
        return Wait::kStopped;
      }
      if (n > 0) return Wait::kReadable;
      if (Failed()) return Wait::kStopped;
      if (give_up_if_starved && SomeoneWaitsForABuffer()) return Wait::kStarved;
    }
  }

  // Fills item->raw from the input, up to the next multiple of the chunk
  // size (`offset` is where it starts in the input); sets *ended at its end.
  // Hands on a part when another reader is starved (see the header), and
  // the next chunk then ends where this one would have: chunks start at
  // the same offsets whatever the timing, as a base's chunks must to be
  // matched. *stopped when the dump failed meanwhile.
  Status Fill(ConcurrentInput& input, uint64_t offset, size_t* content_offset, Item* item, bool* ended, bool* stopped) {
    const size_t chunk = options_.chunk_size - static_cast<size_t>(offset % options_.chunk_size);
    if (!input.fd.valid()) {
      const size_t n = std::min(chunk, input.content.size() - *content_offset);
      if (n > 0) std::memcpy(item->raw.data(), input.content.data() + *content_offset, n);  // empty: no data()
      *content_offset += n;
      item->size = n;
      *ended = *content_offset == input.content.size();
      return Status::Ok();
    }
    item->size = 0;
    while (item->size < chunk) {
      const ssize_t n = ::read(input.fd.get(), item->raw.data() + item->size, chunk - item->size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) return Status::IoError(std::string("read: ") + std::strerror(errno));
      if (n == 0) {
        *ended = true;
        return Status::Ok();
      }
      if (n > 0) item->size += static_cast<size_t>(n);
      if (item->size == chunk) break;
      // Nothing more right now: wait, or hand the part on.
      Status error;
      const Wait wait = WaitReadable(input.fd.get(), /*give_up_if_starved=*/item->size > 0, &error);
      if (wait == Wait::kStarved) break;
      if (wait == Wait::kStopped) {
        *stopped = true;
        return error;
      }
    }
    return Status::Ok();
  }

  // Reads the input to its end and says so to the writer, or stops at the
  // dump's first error.
  void Read(size_t index, Object* added, ConcurrentInput input) {
    Object& object = *added;
    const std::string& name = object.metadata.name;
    uint64_t seq = 0;
    uint64_t offset = 0;
    size_t content_offset = 0;
    bool ended = false;
    bool stopped = false;
    while (!ended && !stopped) {
      if (input.fd.valid()) {
        Status error;
        if (WaitReadable(input.fd.get(), /*give_up_if_starved=*/false, &error) != Wait::kReadable) {
          Fail(error.WithContext("reading '" + name + "'"));
          break;
        }
      }
      Item* item = TakeFree();
      if (!item) break;
      Status s = Fill(input, offset, &content_offset, item, &ended, &stopped);
      if (!s.ok() || stopped) {
        PutFree(item);
        Fail(s.WithContext("reading '" + name + "' at offset " + std::to_string(offset)));
        break;
      }
      if (seq == 0) {
        const std::span<const uint8_t> first(item->raw.data(), item->size);
        ChunkStorage storage = input.choose_storage ? input.choose_storage(first, ended) : ChunkStorage::kEncoded;
        std::lock_guard<std::mutex> lock(mu_);
        object.storage = storage;
      }
      if (item->size == 0) {  // the end, and nothing with it
        PutFree(item);
        break;
      }
      item->object = index;
      item->seq = seq++;
      item->offset = offset;
      offset += item->size;
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(item);
      work_wake_.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (ended) object.chunk_count = seq;
    --reading_;
    finished_readers_.push_back(index);  // joined by the next Add (or Drain)
    writer_wake_.notify_one();
  }

  // Joins the readers that have finished: a dump of many small files one
  // after another must not keep a thread (a stack) for each until its end.
  void JoinFinishedReaders() {
    std::vector<std::thread> finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t index : finished_readers_) {
        auto it = readers_.find(index);
        if (it == readers_.end()) continue;
        finished.push_back(std::move(it->second));
        readers_.erase(it);
      }
      finished_readers_.clear();
    }
    for (std::thread& reader : finished) reader.join();
  }

  void JoinReaders() {
    std::map<size_t, std::thread> readers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      readers.swap(readers_);
      finished_readers_.clear();
    }
    for (auto& [index, reader] : readers) reader.join();
  }

  void Work(BaseChunkCoder* coder) {
    ChunkEncoder encoder(options_.encoder);
    ChunkEncoder raw_encoder(RawEncoder());
    while (true) {
      Item* item = nullptr;
      ChunkStorage storage = ChunkStorage::kEncoded;
      const SeekIndexObject* base_object = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_wake_.wait(lock, [&] { return stop_workers_ || !error_.ok() || !work_.empty(); });
        if (stop_workers_ || !error_.ok()) return;
        item = work_.front();
        work_.pop_front();
        storage = objects_[item->object]->storage;
        base_object = objects_[item->object]->base_object;
      }
      Status s = Encode(item, storage == ChunkStorage::kRaw ? raw_encoder : encoder, storage, coder, base_object);
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok()) {
        FailLocked(s.WithContext("encoding '" + objects_[item->object]->metadata.name + "' at offset " +
                                 std::to_string(item->offset)));
        return;
      }
      objects_[item->object]->encoded.emplace(item->seq, item);
      writer_wake_.notify_one();
    }
  }

  // Codes one chunk: against the base's chunk at the same place when there
  // is one (EncodeChunkWithBase), else (or when that does not pay) on its
  // own with `use`; then keys DATA chunks for dedup.
  Status Encode(Item* item, ChunkEncoder& use, ChunkStorage storage, BaseChunkCoder* coder,
                const SeekIndexObject* base_object) {
    const std::span<const uint8_t> raw(item->raw.data(), item->size);
    ChunkWithBase coded;
    // Raw inputs (vramflow streams, small images) go as they are: a delta
    // coded raw is never smaller.
    VF_RETURN_IF_ERROR(EncodeChunkWithBase(raw, item->offset,
                                           std::span<uint8_t>(item->payload.data(), item->payload.size()), use, coder,
                                           base_object, storage == ChunkStorage::kEncoded, digests_, &coded));
    item->coding = coded.kind;
    item->base_ref = coded.ref;
    item->encoded = coded.encoded;
    item->has_sha256 = coded.sha256.has_value();
    if (coded.sha256) item->sha256 = *coded.sha256;
    // Only encoded inputs' DATA chunks take part in dedup: zero runs cost
    // nothing, and raw inputs (vramflow streams, small images) go as they are.
    item->keyed = coded.kind == BaseCoding::Kind::kOwn && first_copies_ && storage == ChunkStorage::kEncoded &&
                  !item->encoded.zero_run;
    if (item->keyed) item->content = HashContent128(item->raw.data(), item->size);
    return Status::Ok();
  }

  // What the writer does next for one object.
  struct Step {
    enum Kind { kNone, kBegin, kChunk, kEnd } kind = kNone;
    size_t object = 0;
    Item* item = nullptr;
  };

  Step NextStepLocked() {
    for (size_t index : open_) {
      Object& object = *objects_[index];
      if (!object.begun) return Step{Step::kBegin, index, nullptr};
      auto it = object.encoded.find(object.next_seq);
      if (it != object.encoded.end()) {
        Item* item = it->second;
        object.encoded.erase(it);
        return Step{Step::kChunk, index, item};
      }
      if (object.chunk_count && object.next_seq == *object.chunk_count) return Step{Step::kEnd, index, nullptr};
    }
    return Step{};
  }

  // A chunk as a DATA frame or, when the same bytes were written earlier in
  // the same object and are still in the window, as a reference to them.
  // Only references within one object: `streamer serve` hands each file to
  // CRIU whole and lets it go, so a reference into another file could name
  // bytes it no longer has. Called by the writer thread only.
  Status WriteChunk(const Object& object, const Item& item) {
    // item.encoded.raw_hash is the XXH3-64 of the chunk's own bytes for every kind.
    if (item.coding == BaseCoding::Kind::kRef)
      return writer_->AddBaseRef(object.stream_id, item.offset, item.size, item.encoded.raw_hash, item.base_ref);
    const Sha256Digest* sha256 = item.has_sha256 ? &item.sha256 : nullptr;
    if (item.coding == BaseCoding::Kind::kDelta)
      return writer_->AddBaseDelta(object.stream_id, item.offset, item.size, item.encoded.raw_hash, item.base_ref,
                                   item.encoded, sha256);
    if (item.keyed) {
      const FirstCopy* first = first_copies_->Find(InObject(object.stream_id, item.content));
      if (first && first->ref.source_object_id == object.stream_id && first->size == item.size) {
        dedup_bytes_ += item.size;
        return writer_->AddDedupRef(object.stream_id, item.offset, item.size, item.encoded.raw_hash, first->ref,
                                    sha256);
      }
    }
    VF_RETURN_IF_ERROR(writer_->AddChunk(object.stream_id, item.offset, item.size, item.encoded, sha256));
    if (item.keyed)
      first_copies_->Add(InObject(object.stream_id, item.content),
                         FirstCopy{DedupRef{object.stream_id, item.offset, item.content}, item.size});
    return Status::Ok();
  }

  void WriteLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      Step step;
      writer_wake_.wait(lock, [&] {
        if (!error_.ok()) return true;
        step = NextStepLocked();
        return step.kind != Step::kNone || (closing_ && open_.empty());
      });
      if (!error_.ok() || step.kind == Step::kNone) return;
      Object& object = *objects_[step.object];
      lock.unlock();
      const auto began = std::chrono::steady_clock::now();
      Status s;
      switch (step.kind) {
        case Step::kBegin: {
          Result<uint32_t> id = writer_->BeginObject(object.metadata, kUnknownObjectSize);
          if (id.ok()) object.stream_id = *id;
          s = id.status();
          break;
        }
        case Step::kChunk:
          s = WriteChunk(object, *step.item);
          object.size += step.item->size;
          done_bytes_ += step.item->size;
          if (s.ok() && options_.progress) options_.progress(done_bytes_);
          break;
        case Step::kEnd:
          s = writer_->EndObject(object.stream_id);
          break;
        case Step::kNone:
          break;
      }
      write_seconds_ += SecondsSince(began);
      lock.lock();
      switch (step.kind) {
        case Step::kBegin:
          object.begun = true;
          break;
        case Step::kChunk:
          ++object.next_seq;
          free_.push_back(step.item);
          free_wake_.notify_one();
          break;
        case Step::kEnd:
          open_.erase(step.object);
          break;
        case Step::kNone:
          break;
      }
      if (!s.ok()) {
        FailLocked(s.WithContext("writing '" + object.metadata.name + "' to " + sink_->Describe()));
        return;
      }
    }
  }

  void StopWorkers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_workers_ = true;
      work_wake_.notify_all();
    }
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
  }

  void JoinAll() {
    JoinReaders();
    if (write_thread_.joinable()) write_thread_.join();
    StopWorkers();
  }

  ByteSink* sink_;
  const PipelineOptions options_;
  // Every chunk's SHA-256 goes into DIGEST_BLOCKs (asked for, or a base).
  const bool digests_;
  const size_t max_open_inputs_;
  MemoryBudget budget_;
  OrderedDumpPlan plan_;
  std::vector<std::unique_ptr<Item>> items_;
  std::optional<StreamWriter> writer_;  // the writer thread's, then Finish()'s
  // With options.dedup: the latest DATA frames by content (the writer thread's).
  std::optional<DedupWindow<Hash128, FirstCopy, ContentKeyHash>> first_copies_;
  // With a base: one coder per worker (workers_[i] uses coders_[i]).
  std::vector<std::unique_ptr<BaseChunkCoder>> coders_;
  uint64_t dedup_bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
  uint64_t done_bytes_ = 0;   // the writer thread's
  double write_seconds_ = 0;  // the writer thread's

  mutable std::mutex mu_;
  Status error_;                                  // GUARDED_BY(mu_)
  bool closing_ = false;                          // GUARDED_BY(mu_): no more inputs
  bool drained_ = false;                          // every input ended and written
  bool stop_workers_ = false;                     // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<Object>> objects_;  // GUARDED_BY(mu_) (the vector; an Object's fields as noted)
  std::set<size_t> open_;                         // GUARDED_BY(mu_): objects not ended in the stream
  std::vector<Item*> free_;                       // GUARDED_BY(mu_)
  size_t waiting_for_free_ = 0;                   // GUARDED_BY(mu_)
  size_t reading_ = 0;                            // GUARDED_BY(mu_): inputs not at their end
  std::deque<Item*> work_;                        // GUARDED_BY(mu_): read, to encode
  std::condition_variable free_wake_;
  std::condition_variable work_wake_;
  std::condition_variable writer_wake_;
  std::map<size_t, std::thread> readers_;  // GUARDED_BY(mu_): by object, those not joined yet
  std::vector<size_t> finished_readers_;   // GUARDED_BY(mu_): readers that have finished, to join
  std::vector<std::thread> workers_;
  std::thread write_thread_;
};

ConcurrentDump::ConcurrentDump(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
ConcurrentDump::~ConcurrentDump() = default;

Result<std::unique_ptr<ConcurrentDump>> ConcurrentDump::Start(ByteSink* sink, const PipelineOptions& options,
                                                              size_t max_open_inputs) {
  std::unique_ptr<Engine> engine;
  VF_RETURN_IF_ERROR(ExceptionBoundary("dumping concurrent inputs", [&] {
    engine = std::make_unique<Engine>(sink, WithMachineDefaults(options), max_open_inputs);
    return engine->Start();
  }));
  return std::unique_ptr<ConcurrentDump>(new ConcurrentDump(std::move(engine)));
}

Status ConcurrentDump::Add(ConcurrentInput input) {
  return ExceptionBoundary("dumping concurrent inputs", [&] { return engine_->Add(std::move(input)); });
}

Status ConcurrentDump::status() const { return engine_->status(); }

Status ConcurrentDump::Drain(std::vector<ConcurrentObject>* objects) {
  return ExceptionBoundary("dumping concurrent inputs", [&] { return engine_->Drain(objects); });
}

Status ConcurrentDump::Finish(PipelineStats* stats) {
  return ExceptionBoundary("dumping concurrent inputs", [&] { return engine_->Finish(stats); });
}

void ConcurrentDump::Abort(const Status& why) { engine_->Abort(why); }

}  // namespace vramflow
