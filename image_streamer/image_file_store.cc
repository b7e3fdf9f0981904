// SPDX-License-Identifier: MIT
#include "image_streamer/image_file_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/printable.h"
#include "common/units.h"

namespace vramflow {

struct ImageFileStore::File {
  enum class State { kArriving, kComplete, kTaken, kReleased };
  struct Segment {
    // kFrame: one DATA frame's bytes, read from the stream file and decoded
    // again when written out.
    enum class Kind { kMemory, kZero, kFile, kFrame };
    Kind kind = Kind::kMemory;
    uint64_t size = 0;
    BudgetedBuffer data;  // kMemory
    StoredFrame frame;    // kFrame
  };
  uint32_t id = 0;
  std::string name;
  bool file_list = false;
  State state = State::kArriving;
  uint64_t size = 0;
  std::map<uint64_t, Segment> segments;  // by offset; each charged kSegmentBytes
  uint64_t memory = 0;                   // bytes of kMemory segments
  UniqueFd spill;                        // once spilled
  std::string spill_name;
  // The spill file's length, and where its last kFile segment ends: a zero
  // run of a spilled file is a hole in it, so the file may need lengthening
  // (CoverSpillLocked) before it is read there.
  uint64_t spill_length = 0;
  uint64_t spill_needed = 0;
  // The largest kFrame payload and decoded size, and what Take charged for
  // the buffers that decode them again (refunded by Release).
  uint64_t frame_payload_max = 0;
  uint64_t frame_raw_max = 0;
  uint64_t decoding_charged = 0;
};

// The stream's list of files, charged to the budget: the names as they came
// (each followed by a NUL) and where each starts, sorted by name.
struct ImageFileStore::FileList {
  MemoryBudget* budget = nullptr;
  BudgetedBuffer names;
  std::vector<uint32_t> starts;
  uint64_t charged = 0;  // for `starts`
  ~FileList() { budget->Refund(charged); }
  std::string_view Name(uint32_t start) const { return reinterpret_cast<const char*>(names.data()) + start; }
  bool Holds(std::string_view name) const {
    auto it = std::lower_bound(starts.begin(), starts.end(), name,
                               [this](uint32_t start, std::string_view n) { return Name(start) < n; });
    return it != starts.end() && Name(*it) == name;
  }
};

namespace {

Status PwriteAll(int fd, const uint8_t* data, size_t size, uint64_t offset, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing " + what, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status PreadAll(int fd, uint8_t* data, size_t size, uint64_t offset, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::pread(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("reading " + what, errno);
    }
    if (n == 0) return Status::IoError(what + " is shorter than what was written to it");
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status WriteAll(int fd, const uint8_t* data, size_t size, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing " + what, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Copies `size` bytes of `from` at `offset` into `to` (a pipe or a file):
// splice where the kernel can, else through a small buffer.
Status CopyFileRange(int from, uint64_t offset, uint64_t size, int to, const std::string& what) {
  bool can_splice = true;
  std::vector<uint8_t> buffer;
  while (size > 0) {
    if (can_splice) {
      loff_t off = static_cast<loff_t>(offset);
      ssize_t n = ::splice(from, &off, to, nullptr, std::min<uint64_t>(size, 1u << 20), SPLICE_F_MOVE);
      if (n > 0) {
        offset += static_cast<uint64_t>(n);
        size -= static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) return Status::IoError(what + ": the spill file is shorter than what was written to it");
      if (errno == EINTR) continue;
      if (errno != EINVAL && errno != ENOSYS) return Status::FromErrno("writing " + what, errno);
      can_splice = false;  // `to` is not a pipe
      buffer.resize(256 << 10);
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, buffer.size()));
    VF_RETURN_IF_ERROR(PreadAll(from, buffer.data(), n, offset, what + " (its spill file)"));
    VF_RETURN_IF_ERROR(WriteAll(to, buffer.data(), n, what));
    offset += n;
    size -= n;
  }
  return Status::Ok();
}

uint64_t PageRound(uint64_t n) { return (std::max<uint64_t>(n, 1) + 4095) / 4096 * 4096; }

// What one segment costs in memory (a std::map node with its Segment), and
// one file beyond its name (the File, its two map entries): charged to the
// budget, so that a stream of many tiny frames or objects cannot grow past it.
constexpr uint64_t kSegmentBytes = 128;

// A kFrame segment's bytes: its payload read from the stream file into
// `payload`, decoded into `raw` (the segment's size) and checked against
// the frame's hash, as the reader checked them before.
struct FrameDecoding {
  ChunkDecoder decoder;
  std::vector<uint8_t> payload;
};

Status DecodeStoredFrame(int stream_fd, uint64_t stream_start, const StoredFrame& frame, std::span<uint8_t> raw,
                         FrameDecoding* d, const std::string& what) {
  d->payload.resize(frame.payload_size);
  const std::string where = what + ": its frame at stream offset " + std::to_string(frame.payload_offset);
  uint64_t at = stream_start + frame.payload_offset;
  for (size_t done = 0; done < d->payload.size();) {
    ssize_t n = ::pread(stream_fd, d->payload.data() + done, d->payload.size() - done, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("reading " + where + " again", errno);
    if (n == 0) return Status::Corruption(where + " is gone: the stream file was cut short while serve used it");
    done += static_cast<size_t>(n);
    at += static_cast<uint64_t>(n);
  }
  Status s =
      d->decoder.Decode(static_cast<CodecId>(frame.codec), static_cast<TransformId>(frame.transform), d->payload, raw);
  if (!s.ok() || Hash64(raw.data(), raw.size()) != frame.raw_hash)
    return Status::Corruption(where +
                              " no longer decodes to the bytes verified: the stream file changed while "
                              "serve used it");
  return Status::Ok();
}
constexpr uint64_t kFileBytes = 320;

}  // namespace

ImageFileStore::ImageFileStore(MemoryBudget* budget, std::string spill_dir, bool spill_all,
                               std::set<std::string> unlisted)
    : budget_(budget), spill_dir_(std::move(spill_dir)), spill_all_(spill_all), unlisted_(std::move(unlisted)) {}

ImageFileStore::~ImageFileStore() {
  for (auto& [id, file] : by_id_) {
    ClearSegmentsLocked(file.get());
    budget_->Refund(file->decoding_charged);
  }
  file_list_.reset();
  budget_->Refund(files_charged_);
}

Status ImageFileStore::Open() {
  spill_fd_.Reset(::open(spill_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!spill_fd_.valid()) return Status::FromErrno("opening the spill directory " + Printable(spill_dir_), errno);
  return Status::Ok();
}

void ImageFileStore::SetStreamFile(UniqueFd fd, uint64_t stream_start) {
  std::lock_guard<std::mutex> lock(mu_);
  stream_fd_ = std::move(fd);
  stream_start_ = stream_start;
}

uint64_t ImageFileStore::FrameDecodingBytes(const File& file) {
  if (file.frame_raw_max == 0) return 0;
  return file.frame_payload_max + file.frame_raw_max + ChunkDecoder::MemoryBytes(file.frame_raw_max);
}

void ImageFileStore::SetRewrite(const std::string& name, ImageFileRewrite rewrite) {
  std::lock_guard<std::mutex> lock(mu_);
  rewrites_[name] = std::move(rewrite);
}

Status ImageFileStore::RewriteLocked(File* file, const ImageFileRewrite& rewrite) {
  if (file->size > kMaxRewrittenFile)
    return Status::InvalidArgument("image file " + Printable(file->name) + " is " + FormatSize(file->size) +
                                   ", too large to rewrite (at most " + FormatSize(kMaxRewrittenFile) + ")");
  VF_RETURN_IF_ERROR(CoverSpillLocked(file));
  std::vector<uint8_t> bytes(static_cast<size_t>(file->size));
  VF_RETURN_IF_ERROR(ReadLocked(*file, 0, bytes));
  Result<std::vector<uint8_t>> rewritten = rewrite(std::move(bytes));
  if (!rewritten.ok()) return rewritten.status().WithContext("rewriting image file " + Printable(file->name));
  ClearSegmentsLocked(file);
  file->size = rewritten->size();
  return AddFileBytesLocked(file, 0, *rewritten);
}

ImageFileStore::File* ImageFileStore::FindLocked(uint32_t id, const std::string& what) {
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second->state != File::State::kArriving) return nullptr;
  (void)what;
  return it->second.get();
}

Status ImageFileStore::CheckAgainstListLocked(const std::string& name) const {
  if (file_list_ && !file_list_->Holds(name) && !unlisted_.count(name))
    return Status::Corruption("image file " + Printable(name) +
                              " is in the stream but not in its list of files (which said it is absent)");
  return Status::Ok();
}

Status ImageFileStore::Begin(uint32_t id, const std::string& name, bool file_list) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_list) {
    if (has_file_list_object_) return Status::Corruption("the stream holds two lists of files");
  } else {
    if (by_name_.count(name)) return Status::Corruption("image file " + Printable(name) + " is twice in the stream");
    VF_RETURN_IF_ERROR(CheckAgainstListLocked(name));
  }
  const uint64_t cost = kFileBytes + 2 * name.size();
  VF_RETURN_IF_ERROR(ChargeLocked(cost, "image file " + Printable(name) + " (" + std::to_string(by_id_.size()) +
                                            " files before it, " + FormatSize(kFileBytes) + " each beside its name)"));
  files_charged_ += cost;
  auto file = std::make_shared<File>();
  file->id = id;
  file->name = name;
  file->file_list = file_list;
  if (spill_all_) VF_RETURN_IF_ERROR(OpenSpillFileLocked(file.get()));
  by_id_[id] = file;
  if (file_list) has_file_list_object_ = true;
  if (!file_list) by_name_[name] = file;
  return Status::Ok();
}

Status ImageFileStore::ChargeLocked(uint64_t bytes, const std::string& what) {
  bool fits = false;
  VF_RETURN_IF_ERROR(MakeRoomLocked(bytes, &fits));
  if (!fits)
    return Status::InvalidArgument("no memory left within --max-memory (" + FormatSize(budget_->limit()) + ") for " +
                                   what + ": give more --max-memory");
  return budget_->Charge(bytes, what);
}

void ImageFileStore::ClearSegmentsLocked(File* file) {
  budget_->Refund(file->segments.size() * kSegmentBytes);
  file->segments.clear();
  file->memory = 0;
}

Status ImageFileStore::OpenSpillFileLocked(File* file) {
  file->spill_name = std::to_string(file->id) + ".spill";
  file->spill.Reset(::openat(spill_fd_.get(), file->spill_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!file->spill.valid())
    return Status::FromErrno("creating the spill file of " + Printable(file->name) + " in " + Printable(spill_dir_),
                             errno);
  file->spill_length = file->spill_needed = 0;
  return Status::Ok();
}

Status ImageFileStore::CoverSpillLocked(File* file) {
  if (!file->spill.valid() || file->spill_length >= file->spill_needed) return Status::Ok();
  if (::ftruncate(file->spill.get(), static_cast<off_t>(file->spill_needed)) != 0)
    return Status::FromErrno("sizing the spill file of " + Printable(file->name), errno);
  file->spill_length = file->spill_needed;
  return Status::Ok();
}

Status ImageFileStore::SpillLocked(File* file) {
  if (!file->spill.valid()) VF_RETURN_IF_ERROR(OpenSpillFileLocked(file));
  for (auto& [offset, segment] : file->segments) {
    if (segment.kind != File::Segment::Kind::kMemory) continue;
    VF_RETURN_IF_ERROR(PwriteAll(file->spill.get(), segment.data.data(), segment.size, offset,
                                 "the spill file of " + Printable(file->name)));
    segment.kind = File::Segment::Kind::kFile;
    segment.data = BudgetedBuffer();
    spilled_bytes_ += segment.size;
    file->spill_length = std::max(file->spill_length, offset + segment.size);
  }
  file->memory = 0;
  // Zero runs become holes of the spill file, and ranges that touch, one;
  // frames stay where they are in the stream file.
  for (auto it = file->segments.begin(); it != file->segments.end();) {
    if (it->second.kind == File::Segment::Kind::kFrame) {
      ++it;
      continue;
    }
    it->second.kind = File::Segment::Kind::kFile;
    file->spill_needed = std::max(file->spill_needed, it->first + it->second.size);
    auto next = std::next(it);
    if (next != file->segments.end() && next->second.kind != File::Segment::Kind::kFrame &&
        it->first + it->second.size == next->first) {
      it->second.size += next->second.size;
      file->segments.erase(next);
      budget_->Refund(kSegmentBytes);
    } else {
      it = next;
    }
  }
  return CoverSpillLocked(file);
}

Status ImageFileStore::MakeRoomLocked(uint64_t bytes, bool* fits) {
  // Spill the files nobody has taken, largest first, until `bytes` fit
  // beside what the reader keeps for its own buffers.
  const uint64_t limit = budget_->limit() > reserve_ ? budget_->limit() - reserve_ : 0;
  while (budget_->in_use() + bytes > limit) {
    File* victim = nullptr;
    for (const auto& [id, f] : by_id_)
      if ((f->state == File::State::kArriving || f->state == File::State::kComplete) && f->memory > 0 &&
          (!victim || f->memory > victim->memory))
        victim = f.get();
    if (!victim) {
      *fits = false;
      return Status::Ok();
    }
    VF_RETURN_IF_ERROR(SpillLocked(victim));
  }
  *fits = true;
  return Status::Ok();
}

bool ImageFileStore::MergeRangeLocked(File* file, uint64_t offset, uint64_t size, bool in_spill) {
  const File::Segment::Kind kind = in_spill ? File::Segment::Kind::kFile : File::Segment::Kind::kZero;
  auto& segments = file->segments;
  auto next = segments.lower_bound(offset);
  const bool joins_next = next != segments.end() && next->first == offset + size && next->second.kind == kind;
  if (next != segments.begin()) {
    auto prev = std::prev(next);
    if (prev->second.kind == kind && prev->first + prev->second.size == offset) {
      prev->second.size += size;
      if (joins_next) {
        prev->second.size += next->second.size;
        segments.erase(next);
        budget_->Refund(kSegmentBytes);
      }
      return true;
    }
  }
  if (!joins_next) return false;
  auto node = segments.extract(next);
  node.key() = offset;
  node.mapped().size += size;
  segments.insert(std::move(node));
  return true;
}

Status ImageFileStore::AddRangeLocked(File* file, uint64_t offset, uint64_t size, bool in_spill) {
  if (size == 0) return Status::Ok();
  for (int tries = 0;; ++tries) {
    // A zero run of a spilled file is a hole in its spill file.
    in_spill = in_spill || file->spill.valid();
    if (in_spill) file->spill_needed = std::max(file->spill_needed, offset + size);
    if (MergeRangeLocked(file, offset, size, in_spill)) {
      if (tries > 0) budget_->Refund(kSegmentBytes);
      return Status::Ok();
    }
    if (tries > 0) break;
    // A range of its own: charged, which may spill this file too (and merge
    // its ranges): then the range is looked at again.
    VF_RETURN_IF_ERROR(ChargeLocked(kSegmentBytes, "the " + std::to_string(file->segments.size() + 1) +
                                                       " separate byte ranges of image file " + Printable(file->name)));
  }
  file->segments[offset] =
      File::Segment{in_spill ? File::Segment::Kind::kFile : File::Segment::Kind::kZero, size, {}, {}};
  return Status::Ok();
}

Status ImageFileStore::AddFileBytesLocked(File* file, uint64_t offset, std::span<const uint8_t> data) {
  if (data.empty()) return Status::Ok();
  bool fits = false;
  if (!file->spill.valid()) VF_RETURN_IF_ERROR(MakeRoomLocked(PageRound(data.size()) + kSegmentBytes, &fits));
  if (fits && !file->spill.valid()) {
    const std::string what = "image file " + Printable(file->name);
    VF_ASSIGN_OR_RETURN(BudgetedBuffer buffer, BudgetedBuffer::Allocate(budget_, data.size(), what));
    VF_RETURN_IF_ERROR(budget_->Charge(kSegmentBytes, what));
    std::memcpy(buffer.data(), data.data(), data.size());
    file->memory += data.size();
    file->segments[offset] = File::Segment{File::Segment::Kind::kMemory, data.size(), std::move(buffer), {}};
    return Status::Ok();
  }
  // Spilled, or no room in memory even after spilling the rest (the files
  // taken and being pushed hold it): to its spill file.
  if (!file->spill.valid()) VF_RETURN_IF_ERROR(SpillLocked(file));
  VF_RETURN_IF_ERROR(
      PwriteAll(file->spill.get(), data.data(), data.size(), offset, "the spill file of " + Printable(file->name)));
  spilled_bytes_ += data.size();
  file->spill_length = std::max(file->spill_length, offset + data.size());
  return AddRangeLocked(file, offset, data.size(), /*in_spill=*/true);
}

Status ImageFileStore::Write(uint32_t id, uint64_t offset, std::span<const uint8_t> data) {
  std::lock_guard<std::mutex> lock(mu_);
  File* file = FindLocked(id, "data");
  if (!file) return Status::Internal("data for object " + std::to_string(id) + ", which is not arriving");
  return AddFileBytesLocked(file, offset, data);
}

Status ImageFileStore::WriteFrame(uint32_t id, uint64_t offset, const StoredFrame& frame,
                                  std::span<const uint8_t> data) {
  std::lock_guard<std::mutex> lock(mu_);
  File* file = FindLocked(id, "data");
  if (!file) return Status::Internal("data for object " + std::to_string(id) + ", which is not arriving");
  // The file list and a file to rewrite are read whole at their end: their
  // bytes are kept.
  if (!stream_fd_.valid() || spill_all_ || file->file_list || rewrites_.count(file->name) || data.empty())
    return AddFileBytesLocked(file, offset, data);
  VF_RETURN_IF_ERROR(ChargeLocked(kSegmentBytes, "the " + std::to_string(file->segments.size() + 1) +
                                                     " byte ranges of image file " + Printable(file->name)));
  File::Segment segment;
  segment.kind = File::Segment::Kind::kFrame;
  segment.size = data.size();
  segment.frame = frame;
  file->segments[offset] = std::move(segment);
  file->frame_payload_max = std::max<uint64_t>(file->frame_payload_max, frame.payload_size);
  file->frame_raw_max = std::max<uint64_t>(file->frame_raw_max, data.size());
  return Status::Ok();
}

Status ImageFileStore::WriteZeros(uint32_t id, uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  File* file = FindLocked(id, "zeros");
  if (!file) return Status::Internal("zeros for object " + std::to_string(id) + ", which is not arriving");
  return AddRangeLocked(file, offset, size, /*in_spill=*/false);
}

Status ImageFileStore::ReadLocked(const File& file, uint64_t offset, std::span<uint8_t> out) {
  uint64_t done = 0;
  while (done < out.size()) {
    const uint64_t at = offset + done;
    auto it = file.segments.upper_bound(at);
    if (it == file.segments.begin())
      return Status::Corruption("bytes at offset " + std::to_string(at) + " of " + Printable(file.name) +
                                " are not there");
    --it;
    const uint64_t into = at - it->first;
    if (into >= it->second.size)
      return Status::Corruption("bytes at offset " + std::to_string(at) + " of " + Printable(file.name) +
                                " are not there");
    const size_t n = static_cast<size_t>(std::min<uint64_t>(it->second.size - into, out.size() - done));
    switch (it->second.kind) {
      case File::Segment::Kind::kMemory:
        std::memcpy(out.data() + done, it->second.data.data() + into, n);
        break;
      case File::Segment::Kind::kZero:
        std::memset(out.data() + done, 0, n);
        break;
      case File::Segment::Kind::kFile:
        VF_RETURN_IF_ERROR(
            PreadAll(file.spill.get(), out.data() + done, n, at, "the spill file of " + Printable(file.name)));
        break;
      case File::Segment::Kind::kFrame: {
        // The whole frame is decoded, for the part wanted; the caller made
        // room for the buffers (FrameDecodingBytes).
        const uint64_t bytes = FrameDecodingBytes(file);
        VF_RETURN_IF_ERROR(budget_->Charge(bytes, "decoding a frame of image file " + Printable(file.name)));
        Status s;
        {
          FrameDecoding decoding;
          std::vector<uint8_t> raw(static_cast<size_t>(it->second.size));
          s = DecodeStoredFrame(stream_fd_.get(), stream_start_, it->second.frame, raw, &decoding,
                                "image file " + Printable(file.name));
          if (s.ok()) std::memcpy(out.data() + done, raw.data() + into, n);
        }
        budget_->Refund(bytes);
        VF_RETURN_IF_ERROR(s);
        break;
      }
    }
    done += n;
  }
  return Status::Ok();
}

Status ImageFileStore::Copy(uint32_t id, uint64_t offset, uint32_t source, uint64_t source_offset, uint64_t size,
                            uint64_t raw_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  File* file = FindLocked(id, "a dedup reference");
  if (!file) return Status::Internal("a dedup reference for object " + std::to_string(id) + ", which is not arriving");
  auto it = by_id_.find(source);
  if (it == by_id_.end()) return Status::Corruption("dedup reference to unknown object " + std::to_string(source));
  File& from = *it->second;
  if (from.state == File::State::kReleased)
    return Status::NotSupported("a dedup reference into image file " + Printable(from.name) +
                                ", which was already handed over and freed; serve keeps no copy of what it handed "
                                "over (extract, or a stream without references across files, works)");
  // The referenced bytes pass through one buffer (a chunk, at most 64 MiB).
  bool fits = false;
  VF_RETURN_IF_ERROR(MakeRoomLocked(PageRound(size) + kSegmentBytes + FrameDecodingBytes(from), &fits));
  if (!fits)
    return Status::InvalidArgument("no memory left within --max-memory to copy a dedup reference of " +
                                   FormatSize(size) + " into " + Printable(file->name) +
                                   " (the files being pushed into CRIU hold it): give more --max-memory");
  VF_ASSIGN_OR_RETURN(BudgetedBuffer buffer,
                      BudgetedBuffer::Allocate(budget_, size, "a dedup reference into " + Printable(file->name)));
  std::span<uint8_t> bytes(buffer.data(), static_cast<size_t>(size));
  VF_RETURN_IF_ERROR(CoverSpillLocked(&from));
  VF_RETURN_IF_ERROR(ReadLocked(from, source_offset, bytes));
  if (Hash64(bytes.data(), bytes.size()) != raw_hash)
    return Status::Corruption("the bytes a dedup reference names in " + Printable(from.name) +
                              " do not match its hash (the spill file changed?)");
  if (file->spill.valid()) return AddFileBytesLocked(file, offset, bytes);
  VF_RETURN_IF_ERROR(budget_->Charge(kSegmentBytes, "a dedup reference into " + Printable(file->name)));
  file->memory += size;
  file->segments[offset] = File::Segment{File::Segment::Kind::kMemory, size, std::move(buffer), {}};
  return Status::Ok();
}

Status ImageFileStore::TakeFileListLocked(File* file) {
  if (file->size > kMaxStreamerFileList)
    return Status::Corruption("the stream's list of files is " + FormatSize(file->size) + " (at most " +
                              FormatSize(kMaxStreamerFileList) + ")");
  // Its bytes, then (once the object's own are freed) where each name starts.
  const std::string what = "the stream's list of files (" + FormatSize(file->size) + ")";
  bool fits = false;
  VF_RETURN_IF_ERROR(MakeRoomLocked(PageRound(file->size), &fits));
  if (!fits)
    return Status::InvalidArgument("no memory left within --max-memory for " + what + ": give more --max-memory");
  auto list = std::make_unique<FileList>();
  list->budget = budget_;
  VF_ASSIGN_OR_RETURN(list->names, BudgetedBuffer::Allocate(budget_, static_cast<size_t>(file->size), what));
  const std::span<uint8_t> bytes(list->names.data(), static_cast<size_t>(file->size));
  VF_RETURN_IF_ERROR(CoverSpillLocked(file));
  VF_RETURN_IF_ERROR(ReadLocked(*file, 0, bytes));
  ClearSegmentsLocked(file);
  if (file->spill.valid()) {
    file->spill.Reset();
    ::unlinkat(spill_fd_.get(), file->spill_name.c_str(), 0);
  }
  file->state = File::State::kReleased;
  if (!bytes.empty() && bytes.back() != 0)
    return Status::Corruption("the stream's list of files does not end with a NUL byte");
  const uint64_t count = static_cast<uint64_t>(std::count(bytes.begin(), bytes.end(), uint8_t{0}));
  VF_RETURN_IF_ERROR(ChargeLocked(count * sizeof(uint32_t), what + ", " + std::to_string(count) + " names"));
  list->charged = count * sizeof(uint32_t);
  list->starts.reserve(static_cast<size_t>(count));
  for (size_t i = 0, start = 0; i < bytes.size(); ++i) {
    if (bytes[i] != 0) continue;
    list->starts.push_back(static_cast<uint32_t>(start));
    start = i + 1;
  }
  std::sort(list->starts.begin(), list->starts.end(),
            [&list](uint32_t a, uint32_t b) { return list->Name(a) < list->Name(b); });
  for (const auto& [name, f] : by_name_)
    if (!list->Holds(name) && !unlisted_.count(name))
      return Status::Corruption("image file " + Printable(name) + " is in the stream but not in its list of files");
  file_list_ = std::move(list);
  return Status::Ok();
}

Status ImageFileStore::End(uint32_t id, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  File* file = FindLocked(id, "its end");
  if (!file) return Status::Internal("the end of object " + std::to_string(id) + ", which is not arriving");
  file->size = size;
  // Its bytes must tile [0, size) (the validator proved the ranges).
  uint64_t next = 0;
  for (const auto& [offset, segment] : file->segments) {
    if (offset != next) break;
    next += segment.size;
  }
  if (next != size)
    return Status::Internal("image file " + Printable(file->name) + " ended with " + std::to_string(next) + " of " +
                            std::to_string(size) + " bytes in order");
  if (file->file_list) {
    VF_RETURN_IF_ERROR(TakeFileListLocked(file));
  } else {
    auto rewrite = rewrites_.find(file->name);
    if (rewrite != rewrites_.end()) VF_RETURN_IF_ERROR(RewriteLocked(file, rewrite->second));
    size = file->size;
    if (file->spill.valid() && ::ftruncate(file->spill.get(), static_cast<off_t>(size)) != 0)
      return Status::FromErrno("sizing the spill file of " + Printable(file->name), errno);
    file->spill_length = file->spill_needed = size;
    file->state = File::State::kComplete;
  }
  changed_.notify_all();
  return Status::Ok();
}

void ImageFileStore::SetReaderReserve(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  reserve_ = bytes;
}

void ImageFileStore::Finish(const Status& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = outcome;
  changed_.notify_all();
}

Result<std::shared_ptr<ImageFileStore::File>> ImageFileStore::Take(const std::string& name) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (outcome_ && !outcome_->ok()) return *outcome_;
    auto it = by_name_.find(name);
    if (it != by_name_.end()) {
      File& file = *it->second;
      if (file.state == File::State::kTaken || file.state == File::State::kReleased)
        return Status::InvalidArgument("image file " + Printable(name) + " is requested a second time");
      if (file.state == File::State::kComplete) {
        // The buffers that decode its frames again as it is written out.
        const uint64_t decoding = FrameDecodingBytes(file);
        if (decoding > 0) {
          VF_RETURN_IF_ERROR(ChargeLocked(decoding, "decoding image file " + Printable(name) + " as it is pushed"));
          file.decoding_charged = decoding;
        }
        file.state = File::State::kTaken;
        return it->second;
      }
    } else if (outcome_ || (file_list_ && !file_list_->Holds(name))) {
      return std::shared_ptr<File>();
    }
    changed_.wait(lock);
  }
}

Status ImageFileStore::WriteTo(const File& file, int fd, const std::string& what) const {
  // Only the taker touches a taken file's segments (nobody spills it).
  uint64_t next = 0;
  static const uint8_t kZeros[64 << 10] = {};
  FrameDecoding decoding;  // within what Take charged (FrameDecodingBytes)
  std::vector<uint8_t> raw;
  for (const auto& [offset, segment] : file.segments) {
    if (offset != next) return Status::Internal(what + ": a gap at offset " + std::to_string(next));
    switch (segment.kind) {
      case File::Segment::Kind::kMemory:
        VF_RETURN_IF_ERROR(WriteAll(fd, segment.data.data(), segment.size, what));
        break;
      case File::Segment::Kind::kZero:
        for (uint64_t left = segment.size; left > 0;) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(left, sizeof kZeros));
          VF_RETURN_IF_ERROR(WriteAll(fd, kZeros, n, what));
          left -= n;
        }
        break;
      case File::Segment::Kind::kFile:
        VF_RETURN_IF_ERROR(CopyFileRange(file.spill.get(), offset, segment.size, fd, what));
        break;
      case File::Segment::Kind::kFrame:
        raw.resize(static_cast<size_t>(segment.size));
        VF_RETURN_IF_ERROR(DecodeStoredFrame(stream_fd_.get(), stream_start_, segment.frame, raw, &decoding, what));
        VF_RETURN_IF_ERROR(WriteAll(fd, raw.data(), raw.size(), what));
        break;
    }
    next += segment.size;
  }
  return Status::Ok();
}

void ImageFileStore::Release(const std::shared_ptr<File>& file) {
  std::lock_guard<std::mutex> lock(mu_);
  ClearSegmentsLocked(file.get());
  budget_->Refund(file->decoding_charged);
  file->decoding_charged = 0;
  if (file->spill.valid()) {
    file->spill.Reset();
    ::unlinkat(spill_fd_.get(), file->spill_name.c_str(), 0);
  }
  file->state = File::State::kReleased;
}

Status ImageFileStore::MoveInto(int dir_fd, const std::string& shown) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const File*> files;
  for (const auto& [name, file] : by_name_)
    if (file->state == File::State::kComplete) files.push_back(file.get());
  // First every place is looked at: a file cannot replace a directory.
  for (const File* file : files) {
    struct stat st;
    if (::fstatat(dir_fd, file->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISDIR(st.st_mode))
        return Status::AlreadyExists("image file " + Printable(file->name) + " cannot be placed in " +
                                     Printable(shown) + ": a directory of that name is in the way; no file was moved");
    } else if (errno != ENOENT) {
      return Status::FromErrno(
          "looking at " + Printable(file->name) + " in " + Printable(shown) + " (no file was moved)", errno);
    }
  }
  // Then each moves in, exchanged with what is there: a move that fails
  // puts back every one before it.
  std::vector<std::pair<const File*, bool>> moved;  // the file, and whether it was exchanged
  for (const File* file : files) {
    Result<bool> exchanged = MoveOneInto(*file, dir_fd, shown);
    if (!exchanged.ok()) {
      for (auto it = moved.rbegin(); it != moved.rend(); ++it) MoveOneBack(*it->first, dir_fd, it->second);
      return exchanged.status().WithContext("no file was changed");
    }
    moved.emplace_back(file, *exchanged);
  }
  return Status::Ok();
}

Result<bool> ImageFileStore::MoveOneInto(const File& file, int dir_fd, const std::string& shown) const {
  const char* from = file.spill_name.c_str();
  const char* to = file.name.c_str();
  const std::string what = "moving image file " + Printable(file.name) + " into " + Printable(shown);
  if (::renameat2(spill_fd_.get(), from, dir_fd, to, RENAME_NOREPLACE) == 0) return false;
  if (errno == EINVAL || errno == ENOSYS) {  // a file system without renameat2: checked above, not undone
    if (::renameat(spill_fd_.get(), from, dir_fd, to) != 0) return Status::FromErrno(what, errno);
    return false;
  }
  if (errno != EEXIST) return Status::FromErrno(what, errno);
  if (::renameat2(spill_fd_.get(), from, dir_fd, to, RENAME_EXCHANGE) != 0) return Status::FromErrno(what, errno);
  // What it replaced is kept in the staging directory until the end; a
  // directory that came since the check goes back.
  struct stat st;
  if (::fstatat(spill_fd_.get(), from, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    MoveOneBack(file, dir_fd, /*exchanged=*/true);
    return Status::AlreadyExists(what + ": a directory of that name is in the way");
  }
  return true;
}

void ImageFileStore::MoveOneBack(const File& file, int dir_fd, bool exchanged) const {
  const char* from = file.spill_name.c_str();
  const char* to = file.name.c_str();
  if (exchanged) {
    (void)::renameat2(spill_fd_.get(), from, dir_fd, to, RENAME_EXCHANGE);
  } else {
    (void)::renameat(dir_fd, to, spill_fd_.get(), from);
  }
}

bool ImageFileStore::has_file_list() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_list_ != nullptr;
}

uint64_t ImageFileStore::spilled_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spilled_bytes_;
}

}  // namespace vramflow
