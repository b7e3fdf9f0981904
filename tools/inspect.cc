// SPDX-License-Identifier: MIT
#include "tools/inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/printable.h"
#include "common/units.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/decode_ahead.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/pipeline_fit.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/json_object_writer.h"
#include "tools/inspect_index.h"
#include "tools/json_report.h"
#include "transport/core/counting_source.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

struct Mix {
  uint64_t chunks = 0;
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;
};

struct ObjectSummary {
  uint32_t id = 0;
  std::string name;
  uint64_t size = 0;
  bool ended = false;
  std::vector<std::pair<std::string, std::string>> attributes;
  uint64_t data_frames = 0;
  uint64_t zero_frames = 0;
  uint64_t zero_bytes = 0;
  uint64_t dedup_frames = 0;
  uint64_t dedup_bytes = 0;
  uint64_t stored_bytes = 0;  // payload bytes
  uint64_t base_ref_frames = 0;
  uint64_t base_ref_bytes = 0;
  uint64_t base_delta_frames = 0;
  uint64_t base_delta_bytes = 0;
  uint64_t new_bytes = 0;  // raw bytes of DATA frames: what the stream holds itself
  std::map<std::string, Mix> codecs;
};

// Estimated bytes of an object's summary beyond its name and attributes,
// and of a codec mix entry beyond its key (map nodes, strings, counters).
constexpr uint64_t kSummaryRecordBytes = 256;
constexpr uint64_t kMixRecordBytes = 128;

// Gathers per-object and per-codec figures while the reader walks the
// stream. A report lists every object, so what it keeps grows with the
// stream: each object's summary (with its name and attributes) and each of
// its codec mix entries is charged to `budget`, and a stream with more
// fails, naming the limit, instead of growing past it.
class SummaryVisitor final : public StreamVisitor {
 public:
  explicit SummaryVisitor(MemoryBudget* budget) : budget_(budget) {}
  ~SummaryVisitor() override { budget_->Refund(charged_); }
  SummaryVisitor(const SummaryVisitor&) = delete;
  SummaryVisitor& operator=(const SummaryVisitor&) = delete;

  Status OnStreamHeader(const StreamHeader& h) override {
    header = h;
    have_header = true;
    return Status::Ok();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    uint64_t bytes = kSummaryRecordBytes + o.metadata.name.size();
    for (const auto& [key, value] : o.metadata.attributes) bytes += key.size() + value.size() + 2 * sizeof(std::string);
    VF_RETURN_IF_ERROR(
        Charge(bytes, "the summary of object " + std::to_string(o.id) + " " + Printable(o.metadata.name)));
    ObjectSummary& s = objects[o.id];
    s.id = o.id;
    s.name = o.metadata.name;
    s.size = o.size;
    s.attributes = o.metadata.attributes;
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    ObjectSummary& s = objects[e.header.object_id];
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kZeroRun)) {
      ++s.zero_frames;
      s.zero_bytes += e.header.raw_size;
      return Add(s, "zero-run", e.header.raw_size, 0);
    }
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kBaseRef)) {  // its bytes are the base's
      ++s.base_ref_frames;
      s.base_ref_bytes += e.header.raw_size;
      s.stored_bytes += e.payload.size();
      return Add(s, "base-ref", e.header.raw_size, e.payload.size());
    }
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kBaseDelta)) {  // a delta coded after the reference
      ++s.base_delta_frames;
      s.base_delta_bytes += e.header.raw_size;
      s.stored_bytes += e.payload.size();
      return Add(s, "base-delta", e.header.raw_size, e.payload.size());
    }
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kDedupRef)) {  // no codec: its bytes are another frame's
      ++s.dedup_frames;
      s.dedup_bytes += e.header.raw_size;
      s.stored_bytes += e.payload.size();
      return Add(s, "dedup-ref", e.header.raw_size, e.payload.size());
    }
    ++s.data_frames;
    s.new_bytes += e.header.raw_size;
    s.stored_bytes += e.payload.size();
    auto transform = static_cast<TransformId>(e.header.transform);
    std::string key = CodecName(static_cast<CodecId>(e.header.codec));
    if (transform != TransformId::kNone) {
      std::vector<PlaneInfo> planes;
      VF_RETURN_IF_ERROR(ReadPlaneTable(transform, e.payload, e.header.raw_size, &planes));
      key = TransformName(transform) + "[";
      for (size_t i = 0; i < planes.size(); ++i) {
        if (i) key += ',';
        key += CodecName(planes[i].codec);
      }
      key += "]";
      ++word_sizes[WordSize(transform)];  // 1 for fp8's sign planes
    } else {
      ++word_sizes[0];
    }
    return Add(s, key, e.header.raw_size, e.payload.size());
  }
  Status OnObjectEnd(const ObjectState& o) override {
    objects[o.id].ended = true;
    objects[o.id].size = o.size;
    return Status::Ok();
  }
  Status OnStreamEnd(const StreamTotals& t) override {
    totals = t;
    complete = true;
    return Status::Ok();
  }

  Status Add(ObjectSummary& s, const std::string& key, uint64_t raw, uint64_t stored) {
    if (!s.codecs.count(key))
      VF_RETURN_IF_ERROR(Charge(kMixRecordBytes + key.size(), "the codec mix of object " + std::to_string(s.id)));
    for (Mix* m : {&s.codecs[key], &codecs[key]}) {
      ++m->chunks;
      m->raw_bytes += raw;
      m->stored_bytes += stored;
    }
    return Status::Ok();
  }

  StreamHeader header;
  bool have_header = false;
  std::map<uint32_t, ObjectSummary> objects;
  std::map<std::string, Mix> codecs;
  std::map<unsigned, uint64_t> word_sizes;  // chunks by the word size of their transform (0: none)
  StreamTotals totals;
  bool complete = false;

 private:
  Status Charge(uint64_t bytes, const std::string& what) {
    Status s = budget_->Charge(bytes, "inspect's report, at " + std::to_string(objects.size()) + " objects: " + what);
    if (!s.ok())
      return s.WithContext(
          "the report keeps every object's summary; give more --max-memory, or inspect without "
          "--full a stream with a seek index");
    charged_ += bytes;
    return Status::Ok();
  }

  MemoryBudget* budget_;
  uint64_t charged_ = 0;
};

std::string WordSizeLabel(unsigned w) { return w == 0 ? "none" : std::to_string(w) + "-byte"; }

// `why_whole`: why a stored stream was read whole rather than through its
// seek index (empty when that was not tried).
void PrintText(const SummaryVisitor& v, uint64_t stream_bytes, const Status& status, const std::string& why_whole,
               std::ostream& out) {
  uint64_t raw = 0;
  for (const auto& [id, o] : v.objects) raw += o.ended ? o.size : 0;
  out << "stream:   " << DescribeStreamHeader(v.header) << "\n";
  out << "objects:  " << v.objects.size() << ", " << FormatSize(raw) << " raw in " << FormatSize(stream_bytes)
      << " (ratio " << FormatRatio(raw, stream_bytes) << ")\n";
  out << "status:   " << (status.ok() ? "complete" : "INCOMPLETE OR DAMAGED: " + status.ToString()) << "\n";
  if (!why_whole.empty()) out << "read:     every frame: " << why_whole << "\n";
  out << "\n";

  char line[512];
  std::snprintf(line, sizeof(line), "%5s  %-32s %14s %8s %8s %8s %14s %7s\n", "id", "name", "size", "chunks", "zeros",
                "refs", "stored", "ratio");
  out << line;
  for (const auto& [id, o] : v.objects) {
    const std::string name = ShownText(o.name, 32);
    std::snprintf(line, sizeof(line), "%5u  %-32s %14s %8llu %8llu %8llu %14s %7s%s\n", o.id, name.c_str(),
                  o.size == kUnknownObjectSize ? "?" : FormatSize(o.size).c_str(),
                  static_cast<unsigned long long>(o.data_frames), static_cast<unsigned long long>(o.zero_frames),
                  static_cast<unsigned long long>(o.dedup_frames), FormatSize(o.stored_bytes).c_str(),
                  FormatRatio(o.size, o.stored_bytes).c_str(), o.ended ? "" : "  (not ended)");
    out << line;
    for (const auto& [k, val] : o.attributes) out << "       " << ShownText(k) << " = " << ShownText(val) << "\n";
    if (v.header.flags & kStreamFlagBase)
      out << "       from the base: " << FormatSize(o.base_ref_bytes) << " referenced, "
          << FormatSize(o.base_delta_bytes) << " as deltas, " << FormatSize(o.new_bytes) << " new\n";
  }
  out << "\ncodec mix:\n";
  for (const auto& [key, m] : v.codecs) {
    double share = raw ? 100.0 * static_cast<double>(m.raw_bytes) / static_cast<double>(raw) : 0;
    std::snprintf(line, sizeof(line), "  %-32s %8llu chunks %14s raw (%5.1f%%) -> %14s  ratio %s\n", key.c_str(),
                  static_cast<unsigned long long>(m.chunks), FormatSize(m.raw_bytes).c_str(), share,
                  FormatSize(m.stored_bytes).c_str(), FormatRatio(m.raw_bytes, m.stored_bytes).c_str());
    out << line;
  }
  out << "word sizes detected (data chunks):";
  if (v.word_sizes.empty()) out << " -";
  for (const auto& [w, n] : v.word_sizes) out << " " << WordSizeLabel(w) << " x" << n;
  out << "\n";
}

nlohmann::ordered_json MixJson(const Mix& m) {
  return {{"chunks", m.chunks}, {"raw_bytes", m.raw_bytes}, {"stored_bytes", m.stored_bytes}};
}

// Written as it goes (JsonObjectWriter): each object's entry exists only
// while it is written, so the JSON form needs no more memory than the
// summaries charged to the budget, as the text form.
void PrintJson(const SummaryVisitor& v, uint64_t stream_bytes, const Status& status, const std::string& why_whole,
               std::ostream& out) {
  nlohmann::ordered_json j = JsonReportHead("inspect", status);
  j["complete"] = status.ok();
  PutJsonText(j, "producer", v.header.producer);
  j["format_version"] = v.header.version;
  j["chunk_size"] = v.header.chunk_size;
  j["dedup_window"] = DedupWindowJson(v.header);
  j["source"] = "frames";
  if (!why_whole.empty()) PutJsonText(j, "note", why_whole);
  j["stream_bytes"] = stream_bytes;
  j["bytes_read"] = stream_bytes;
  uint64_t raw = 0;
  for (const auto& [id, o] : v.objects) raw += o.ended ? o.size : 0;
  j["raw_bytes"] = raw;
  j["ratio"] = stream_bytes ? static_cast<double>(raw) / static_cast<double>(stream_bytes) : 0.0;
  uint64_t new_bytes = 0, ref_bytes = 0, delta_bytes = 0;
  for (const auto& [id, o] : v.objects) {
    new_bytes += o.new_bytes;
    ref_bytes += o.base_ref_bytes;
    delta_bytes += o.base_delta_bytes;
  }
  j["new_bytes"] = new_bytes;  // as the seek index's report has them
  j["base_ref_bytes"] = ref_bytes;
  j["base_delta_bytes"] = delta_bytes;
  JsonObjectWriter writer(out);
  writer.Members(j);
  writer.BeginArray("objects");
  for (const auto& [id, o] : v.objects) {
    nlohmann::ordered_json jo;
    jo["id"] = o.id;
    PutJsonText(jo, "name", o.name);
    jo["size"] = o.size == kUnknownObjectSize ? nlohmann::ordered_json() : nlohmann::ordered_json(o.size);
    jo["ended"] = o.ended;
    jo["data_chunks"] = o.data_frames;
    jo["zero_runs"] = o.zero_frames;
    jo["zero_bytes"] = o.zero_bytes;
    jo["dedup_refs"] = o.dedup_frames;
    jo["dedup_bytes"] = o.dedup_bytes;
    jo["stored_bytes"] = o.stored_bytes;
    jo["new_bytes"] = o.new_bytes;
    jo["base_refs"] = o.base_ref_frames;
    jo["base_ref_bytes"] = o.base_ref_bytes;
    jo["base_deltas"] = o.base_delta_frames;
    jo["base_delta_bytes"] = o.base_delta_bytes;
    jo["attributes"] = AttributesJson(o.attributes);
    nlohmann::ordered_json codecs = nlohmann::ordered_json::object();
    for (const auto& [key, m] : o.codecs) codecs[key] = MixJson(m);
    jo["codecs"] = codecs;
    writer.Element(jo);
  }
  writer.EndArray();
  nlohmann::ordered_json codecs = nlohmann::ordered_json::object();
  for (const auto& [key, m] : v.codecs) codecs[key] = MixJson(m);
  writer.Member("codecs", codecs);
  nlohmann::ordered_json words = nlohmann::ordered_json::object();
  for (const auto& [w, n] : v.word_sizes) words[WordSizeLabel(w)] = n;
  writer.Member("word_sizes", words);
  writer.End();
}

// The objects from the seek index of a stored stream, reading nothing else.
// Returns false when the stream is to be read whole: it cannot be read at
// offsets (a pipe, socket, fd), or it has no usable index (*why_whole says
// why, for the report).
Result<bool> InspectIndex(const InspectOptions& options, std::ostream& out, std::string* why_whole) {
  Result<std::unique_ptr<RandomAccessSource>> opened = OpenRandomAccess(options.input, options.transport);
  if (!opened.ok()) {
    if (opened.status().code() == Status::Code::kNotSupported) return false;
    return opened.status();
  }
  std::shared_ptr<RandomAccessSource> file(std::move(*opened));
  CountingRandomAccess counting(file);
  // Like the reader's other records, the index gets an eighth of the budget.
  Result<StoredStreamIndex> stored = ReadSeekIndex(counting, std::max<uint64_t>(options.max_memory / 8, 1u << 20));
  if (!stored.ok()) {
    *why_whole =
        stored.status().code() == Status::Code::kNotSupported
            ? stored.status().message()
            : "the seek index of " + counting.Describe() + " cannot be used (" + stored.status().ToString() + ")";
    return false;
  }
  StreamIdentity identity;
  identity.id = stored->id;
  // An incremental stream's BASE frame is read besides: not counted in
  // bytes_read, which says what finding the index cost, as a restore
  // through it pays.
  if (stored->header.flags & kStreamFlagBase) {
    VF_ASSIGN_OR_RETURN(identity.base, ReadBaseFrame(*file, counting.Describe()));
  }
  if (options.json) PrintIndexJson(*stored, identity, counting.bytes(), out);
  else PrintIndexText(*stored, identity, counting.bytes(), out);
  return true;
}

}  // namespace

Status RunInspect(const InspectOptions& options, std::ostream& out, bool* reported) {
  bool unused;
  if (!reported) reported = &unused;
  *reported = false;
  std::string why_whole;
  if (!options.full && !options.decode) {
    VF_ASSIGN_OR_RETURN(bool done, InspectIndex(options, out, &why_whole));
    *reported = done;
    if (done) return Status::Ok();
  }
  TransportOptions transport = options.transport;
  const uint64_t reader_memory = PlanReaderBudget(options.max_memory, options.input, &transport).pipeline;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(options.input, transport));
  CountingSource counting(source.get());
  MemoryBudget budget(reader_memory);
  SummaryVisitor visitor(&budget);
  ReadOptions read;
  read.decode = options.decode;
  read.budget = &budget;
  Status status = ReadStream(counting, visitor, read);
  (void)source->Finish(status);
  // Bytes without a stream header are no stream at all: a report of zeros
  // would read as an empty stream. The error alone says what they are.
  if (!visitor.have_header)
    return status.ok() ? Status::Corruption("'" + options.input + "' holds no vramflow stream")
                       : status.WithContext("'" + options.input + "' is not a vramflow chunk stream");
  if (options.json) PrintJson(visitor, counting.bytes(), status, why_whole, out);
  else PrintText(visitor, counting.bytes(), status, why_whole, out);
  *reported = true;
  return status;
}

namespace {

// What verify reports: the totals alone, so that it keeps nothing per object.
class TotalsVisitor final : public StreamVisitor {
 public:
  Status OnStreamEnd(const StreamTotals& t) override {
    totals = t;
    return Status::Ok();
  }
  StreamTotals totals;
};

}  // namespace

Status RunVerify(const std::string& input, bool quiet, uint64_t max_memory, const TransportOptions& transport,
                 std::ostream& out, VerifyReport* report, const std::vector<std::string>& bases, unsigned threads,
                 const std::string& base_store) {
  TransportOptions shared = transport;
  const BudgetPlan plan = PlanReaderBudget(max_memory, input, &shared);
  const uint64_t reader_memory = plan.pipeline;
  TransportOptions base_reads = transport;
  VF_ASSIGN_OR_RETURN(OpenBaseFn open_base,
                      ReaderBaseOpener(input, bases, base_store, &base_reads, "verify", plan.base_index));
  shared.net.base_offer = base_reads.net.base_offer;  // what a sender is offered
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(input, shared));
  CountingSource counting(source.get());
  TotalsVisitor visitor;
  Stopwatch clock;
  MemoryBudget budget(reader_memory);
  // Every frame is decoded, hashed and checked against its DIGEST_BLOCK on
  // `threads` threads, a few frames ahead of the in-order checks.
  const ReadOptions read{.decode = true, .budget = &budget, .open_base = open_base};
  if (threads == 0) threads = DefaultThreads(ReadMachineLimits());
  auto note = [](const std::string& line) { std::fprintf(stderr, "vramflow verify: note: %s\n", line.c_str()); };
  Status status = ReadStreamDecodingAhead(counting, visitor, DecodeAheadOptions{threads, read, note});
  (void)source->Finish(status);
  if (report) {
    report->objects = visitor.totals.object_count;
    report->raw_bytes = visitor.totals.raw_bytes;
    report->frames = visitor.totals.frame_count;
    report->stream_bytes = counting.bytes();
    report->seconds = clock.Seconds();
  }
  if (status.ok() && !quiet)
    out << "OK: " << input << ": " << visitor.totals.object_count << " objects, "
        << FormatSize(visitor.totals.raw_bytes) << " raw, " << visitor.totals.frame_count
        << " frames, every hash and range checked (" << FormatRate(visitor.totals.raw_bytes, clock.Seconds()) << ")\n";
  return status;
}

}  // namespace vramflow
