// SPDX-License-Identifier: MIT
#include "tools/unpack.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "common/endian.h"
#include "common/owner_tag.h"
#include "common/printable.h"
#include "common/private_directory.h"
#include "common/progress.h"
#include "common/safe_path.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/decode_ahead.h"
#include "streamer/device/file_device.h"
#include "streamer/format/amdgpu_pages.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/sub_stream.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/pipeline.h"
#include "streamer/pipeline_fit.h"
#include "tools/cli/cli_util.h"
#include "tools/output_limit.h"
#include "transport/core/fd_stream.h"
#include "transport/core/uri.h"
#include "transport/s3/s3_part_plan.h"

namespace vramflow {
namespace {

Status PwriteAll(int fd, std::span<const uint8_t> data, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Moves `from` (under from_dir) to `to` (under to_dir); refuses to replace
// an existing entry unless `replace`.
Status MoveInto(int from_dir, const std::string& from, int to_dir, const std::string& to, bool replace,
                const std::string& shown) {
  int r = replace ? ::renameat(from_dir, from.c_str(), to_dir, to.c_str())
                  : ::renameat2(from_dir, from.c_str(), to_dir, to.c_str(), RENAME_NOREPLACE);
  if (r == 0) return Status::Ok();
  if (errno == EEXIST) return Status::AlreadyExists(Printable(shown) + " exists (use --force to overwrite)");
  return Status::FromErrno("moving the unpacked object into " + Printable(shown), errno);
}

// fsync of a directory, so that the entries just moved into it survive a
// power loss.
Status SyncDirectory(int dir_fd, const std::string& shown) {
  if (::fsync(dir_fd) != 0) return Status::FromErrno("syncing the directory '" + shown + "'", errno);
  return Status::Ok();
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Estimated bytes of an object's selection key kept by a sequential unpack
// with a filter, beyond its name and attributes (vector slot, strings).
constexpr uint64_t kSelectionKeyRecordBytes = 128;

// Writes the single (selected) object of a stream to an fd, in order. With
// a filter it keeps every object's selection key to the end (to check the
// selection and list what the stream holds); they are charged to `budget`
// (the reader's --max-memory), so a stream of more objects than it holds
// fails, naming the budget, instead of growing past it.
class SequentialVisitor final : public StreamVisitor {
 public:
  SequentialVisitor(int fd, std::string description, const ObjectSelector* filter, OutputLimit* limit,
                    MemoryBudget* budget)
      : sink_(BorrowFdSink(fd, description)),
        description_(std::move(description)),
        filter_(filter),
        limit_(limit),
        budget_(budget) {}
  ~SequentialVisitor() override { budget_->Refund(charged_); }
  SequentialVisitor(const SequentialVisitor&) = delete;
  SequentialVisitor& operator=(const SequentialVisitor&) = delete;

  Status OnObjectBegin(const ObjectState& o) override {
    if (filter_) VF_RETURN_IF_ERROR(KeepSelectionKey(o));
    if (filter_ && !filter_->Matches(o.metadata)) {
      skipped_.insert(o.id);
      return Status::Ok();
    }
    if (++objects_ > 1)
      return Status::InvalidArgument("the stream holds more than one object (object " + std::to_string(o.id) + " " +
                                     Printable(o.metadata.name) + "); unpack to a directory instead of " +
                                     description_);
    if (o.size != kUnknownObjectSize) VF_RETURN_IF_ERROR(limit_->Claim(o.size, "object " + Printable(o.metadata.name)));
    unknown_size_ = o.size == kUnknownObjectSize;
    name_ = o.metadata.name;
    const std::string* legacy = o.metadata.Find(kLegacyFormatKey);
    legacy_ = legacy && *legacy == kLegacyFormatAmdgpuPages;
    if (legacy_) {
      if (o.size == kUnknownObjectSize) return Status::NotSupported("legacy image of unknown size");
      uint8_t header[kAmdgpuPagesHeaderSize];
      const std::string* order = o.metadata.Find(kLegacyByteOrderKey);
      EncodeAmdgpuPagesHeader(o.size, !order || *order != "be", header);
      VF_RETURN_IF_ERROR(Write(header));
    }
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    if (skipped_.count(e.header.object_id)) return Status::Ok();
    if (e.header.offset != next_)
      return Status::InvalidArgument("chunks arrive out of order (offset " + std::to_string(e.header.offset) +
                                     ", expected " + std::to_string(next_) + "); unpack to a file instead of " +
                                     description_);
    if (e.dedup)  // its bytes were written to stdout already; nothing to copy them from
      return Status::NotSupported("the stream uses dedup references (frame at stream offset " +
                                  std::to_string(e.stream_offset) + "); unpack to a file instead of " + description_);
    if (unknown_size_)  // claimed as it comes: nothing said how much would
      VF_RETURN_IF_ERROR(limit_->Claim(e.header.raw_size, "object " + Printable(name_) + " (of unknown size)"));
    next_ += e.header.raw_size;
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kZeroRun)) {
      static const uint8_t kZeros[64 * 1024] = {};
      for (uint64_t left = e.header.raw_size; left > 0;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, sizeof(kZeros)));
        VF_RETURN_IF_ERROR(Write(std::span<const uint8_t>(kZeros, n)));
        left -= n;
      }
      return Status::Ok();
    }
    return Write(e.data);
  }
  uint64_t objects() const { return objects_; }
  uint64_t bytes() const { return next_; }
  const std::vector<ObjectMetadata>& seen() const { return seen_; }

 private:
  // Keeps `o`'s selection key (only to check the selection), charged first.
  Status KeepSelectionKey(const ObjectState& o) {
    ObjectMetadata key = SelectionKey(o.metadata);
    uint64_t bytes = kSelectionKeyRecordBytes + key.name.size();
    for (const auto& [k, v] : key.attributes) bytes += k.size() + v.size() + 2 * sizeof(std::string);
    Status s = budget_->Charge(bytes, "unpack's selection check, at " + std::to_string(seen_.size()) +
                                          " objects: the name of object " + std::to_string(o.id) + " " +
                                          Printable(o.metadata.name));
    if (!s.ok())
      return s.WithContext(
          "with --object or --gpu, unpack keeps every object's name to check the selection; give "
          "more --max-memory, or unpack a stream with a seek index from a file or s3://");
    charged_ += bytes;
    seen_.push_back(std::move(key));
    return Status::Ok();
  }
  Status Write(std::span<const uint8_t> data) { return sink_->Write(data); }
  std::unique_ptr<ByteSink> sink_;
  std::string description_;
  const ObjectSelector* filter_;
  OutputLimit* limit_;
  MemoryBudget* budget_;
  uint64_t charged_ = 0;
  std::vector<ObjectMetadata> seen_;  // with a filter: every object's SelectionKey
  std::set<uint32_t> skipped_;
  uint64_t objects_ = 0;
  uint64_t next_ = 0;
  bool legacy_ = false;
  bool unknown_size_ = false;
  std::string name_;
};

// A private directory beside the output, removed with its contents on exit,
// or by `cleanup` if the process is interrupted. Its name carries this
// process's owner tag (kStagingMarker), so that the next unpack beside the
// same output removes it if a SIGKILL left it behind.
constexpr char kStagingMarker[] = ".vf-unpack-";
class StagingDirectory {
 public:
  Status Create(const std::string& beside, CleanupRegistry* cleanup) {
    std::string base = beside.substr(beside.find_last_of('/') + 1);
    (void)SweepDeadTemporaries(ParentOf(beside), kStagingMarker);
    VF_RETURN_IF_ERROR(dir_.Create(ParentOf(beside) + "/." + base + kStagingMarker + OwnerTag() + "-", cleanup)
                           .WithContext("staging beside " + Printable(beside)));
    fd_.Reset(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd_.valid()) return Status::FromErrno("opening " + Printable(dir_.path()), errno);
    return Status::Ok();
  }
  int fd() const { return fd_.get(); }

 private:
  PrivateDirectory dir_;
  UniqueFd fd_;  // closed before dir_ removes the directory (members go in reverse order)
};

// Estimated bytes an unpack keeps for every object until the end, beyond
// copies of its name: its staged file's record, its entry in the name set,
// its file on the device (map nodes, closures, strings); and how many
// copies of the name they hold.
constexpr uint64_t kUnpackObjectRecordBytes = 512;
constexpr uint64_t kUnpackNameCopies = 5;

// The files of an unpack, created in a staging directory as objects begin,
// sized when they end, and moved to their final places by Commit(). Objects
// that `filter` leaves out go to a second staging directory, by id, so that
// references into them resolve, and are never moved. What it keeps for
// every object until Commit() is given as the target's kept_bytes, which
// the restore graph charges to the reader's record limit: a stream of more
// objects than --max-memory holds fails.
class StagedFiles {
 public:
  StagedFiles(int staging_fd, std::string output, bool directory_forced, bool force, bool fsync, FileDevice* device,
              const ObjectSelector* filter, OutputLimit* limit, CleanupRegistry* cleanup)
      : staging_fd_(staging_fd),
        output_(std::move(output)),
        directory_forced_(directory_forced),
        force_(force),
        fsync_(fsync),
        device_(device),
        filter_(filter),
        limit_(limit),
        cleanup_(cleanup) {}

  // Creates the staged file of an object that begins; its content goes
  // through the device, after the legacy header if it has one.
  Result<RestoreTarget> Open(const ObjectState& o) {
    VF_ASSIGN_OR_RETURN(RestoreTarget target, OpenTarget(o));
    target.kept_bytes = kUnpackObjectRecordBytes + (kUnpackNameCopies + (filter_ ? 1 : 0)) * o.metadata.name.size();
    return target;
  }

  // Open(), but for the size of its records.
  Result<RestoreTarget> OpenTarget(const ObjectState& o) {
    if (filter_) seen_.push_back(SelectionKey(o.metadata));  // only to check the selection
    // Declared sizes are claimed before anything is written (zero runs
    // become holes, so a bomb would otherwise cost nothing until copied).
    if (o.size != kUnknownObjectSize) VF_RETURN_IF_ERROR(limit_->Claim(o.size, "object " + Printable(o.metadata.name)));
    if (filter_ && !filter_->Matches(o.metadata)) return OpenSkipped(o);
    VF_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitSafeRelativePath(o.metadata.name));
    if (!names_.insert(o.metadata.name).second)
      return Status::InvalidArgument("object name " + Printable(o.metadata.name) + " appears twice in the stream");
    if (directory_forced_ && !force_) {
      std::string target = output_ + "/" + o.metadata.name;
      struct stat st;
      if (::lstat(target.c_str(), &st) == 0)
        return Status::AlreadyExists(Printable(target) + " exists (use --force to overwrite)");
    }
    // Created here and closed again: the device opens it when it writes to
    // it, so an unpack holds a few files open however many objects it has.
    VF_RETURN_IF_ERROR(CreateEntry([&]() -> Status {
      VF_ASSIGN_OR_RETURN(UniqueFd dir, OpenParentDirectory(staging_fd_, parts, /*create=*/true));
      UniqueFd created(
          ::openat(dir.get(), parts.back().c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!created.valid()) return Status::FromErrno("creating staged file for " + Printable(o.metadata.name), errno);
      return Status::Ok();
    }));
    OpenFile& f = files_[o.id];
    f.parts = std::move(parts);
    f.claimed = o.size != kUnknownObjectSize;
    const std::string* legacy = o.metadata.Find(kLegacyFormatKey);
    if (legacy && *legacy == kLegacyFormatAmdgpuPages) {
      if (o.size == kUnknownObjectSize) return Status::NotSupported("legacy image of unknown size");
      f.header = kAmdgpuPagesHeaderSize;
      const std::string* order = o.metadata.Find(kLegacyByteOrderKey);
      f.legacy_little_endian = !order || *order != "be";
    }
    uint64_t size = o.size == kUnknownObjectSize ? FileDevice::kUnbounded : o.size;
    FileOpener open = [this, parts = f.parts, name = o.metadata.name] { return OpenStaged(parts, name); };
    VF_ASSIGN_OR_RETURN(uint32_t bo, device_->ImportFile(std::move(open), f.header, size, Printable(o.metadata.name)));
    return RestoreTarget{device_, bo, /*zero_filled=*/true};
  }

  // Writes the legacy header and sets the final size (zero runs at the end
  // of an object are holes until then).
  Status Finish(const ObjectState& o) {
    const OpenFile& f = files_.at(o.id);
    if (f.skipped) return Status::Ok();  // kept only for references into it
    const std::string what = Printable(o.metadata.name);
    VF_ASSIGN_OR_RETURN(UniqueFd fd, OpenStaged(f.parts, o.metadata.name));
    if (f.header) {
      uint8_t header[kAmdgpuPagesHeaderSize];
      EncodeAmdgpuPagesHeader(o.size, f.legacy_little_endian, header);
      VF_RETURN_IF_ERROR(PwriteAll(fd.get(), header, 0, what));
    }
    if (!f.claimed)
      VF_RETURN_IF_ERROR(limit_->Claim(o.size, "object " + Printable(o.metadata.name) + " (of unknown size)"));
    if (::ftruncate(fd.get(), static_cast<off_t>(f.header + o.size)) != 0)
      return Status::FromErrno("sizing " + what, errno);
    if (fsync_ && ::fsync(fd.get()) != 0) return Status::FromErrno("syncing " + what, errno);
    if (::close(fd.Release()) != 0) return Status::FromErrno("closing " + what, errno);
    kept_bytes_ += o.size;
    return Status::Ok();
  }

  // Moves the staged files to their final places (with fsync_: and syncs
  // every directory that gained an entry).
  Status Commit(UnpackReport* report) {
    std::vector<const OpenFile*> kept;
    for (const auto& [id, f] : files_)
      if (!f.skipped) kept.push_back(&f);
    report->objects = kept.size();
    if (!directory_forced_ && kept.size() == 1) {
      const OpenFile& f = *kept.front();
      VF_ASSIGN_OR_RETURN(UniqueFd from, OpenParentDirectory(staging_fd_, f.parts, false));
      VF_RETURN_IF_ERROR(MoveInto(from.get(), f.parts.back(), AT_FDCWD, output_, force_, output_));
      report->written.push_back(output_);
      return fsync_ ? SyncPath(ParentOf(output_)) : Status::Ok();
    }
    if (kept.empty() && !directory_forced_) return Status::Ok();
    if (::mkdir(output_.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::FromErrno("creating directory '" + output_ + "'", errno);
    if (fsync_) VF_RETURN_IF_ERROR(SyncPath(ParentOf(output_)));
    UniqueFd out(::open(output_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!out.valid()) return Status::FromErrno("opening directory '" + output_ + "'", errno);
    // All or nothing: every destination is checked before the first move,
    // and a move that fails all the same takes the earlier ones back.
    for (const OpenFile* f : kept) VF_RETURN_IF_ERROR(CheckDestination(out.get(), *f));
    std::vector<const OpenFile*> moved;
    for (const OpenFile* f : kept) {
      Status s = MoveOne(out.get(), *f, /*back=*/false);
      if (!s.ok()) {
        for (auto it = moved.rbegin(); it != moved.rend(); ++it) (void)MoveOne(out.get(), **it, /*back=*/true);
        return s.WithContext(moved.empty()
                                 ? "nothing was moved"
                                 : "the " + std::to_string(moved.size()) + " files moved before it were moved back");
      }
      moved.push_back(f);
    }
    for (const OpenFile* f : kept) report->written.push_back(Shown(*f));
    if (fsync_) {                               // every directory that gained an entry, new subdirectories' parents too
      std::set<std::vector<std::string>> dirs;  // as paths under output_
      for (const OpenFile* f : kept)
        for (size_t depth = 0; depth < f->parts.size(); ++depth)
          dirs.emplace(f->parts.begin(), f->parts.begin() + depth);
      for (const std::vector<std::string>& dir : dirs) VF_RETURN_IF_ERROR(SyncSubdirectory(out.get(), dir));
    }
    return Status::Ok();
  }

  // Every object the stream held, selected or not.
  const std::vector<ObjectMetadata>& seen() const { return seen_; }
  // Bytes of the objects that become files.
  uint64_t kept_bytes() const { return kept_bytes_; }

 private:
  // An object's file in the staging directory; not held open (see OpenStaged).
  struct OpenFile {
    std::vector<std::string> parts;
    uint64_t header = 0;  // bytes of legacy header before the content
    bool legacy_little_endian = true;
    bool skipped = false;  // left out by the filter: restored only for references into it
    bool claimed = false;  // its size was claimed from the output limit at the start
  };

  std::string Shown(const OpenFile& f) const {
    std::string shown = output_ + "/";
    for (size_t i = 0; i < f.parts.size(); ++i) shown += (i ? "/" : "") + f.parts[i];
    return shown;
  }

  // Fails if the file cannot be moved to its place under `out`: a directory
  // on its path is something else, or without force the place is taken; a
  // directory in the place is never replaced.
  Status CheckDestination(int out, const OpenFile& f) const {
    std::string path;
    for (size_t i = 0; i < f.parts.size(); ++i) {
      path += (i ? "/" : "") + f.parts[i];
      struct stat st;
      if (::fstatat(out, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return Status::Ok();  // created (directories) or moved (the file) below
        return Status::FromErrno("checking " + Printable(output_ + "/" + path), errno);
      }
      const bool last = i + 1 == f.parts.size();
      if (!last && S_ISLNK(st.st_mode))
        return Status::AlreadyExists(Printable(output_ + "/" + path) + " is a symlink, which unpack does not follow");
      if (!last && !S_ISDIR(st.st_mode))
        return Status::AlreadyExists(Printable(output_ + "/" + path) + " exists and is not a directory");
      if (last && S_ISDIR(st.st_mode)) return Status::AlreadyExists(Printable(Shown(f)) + " exists and is a directory");
      if (last && !force_) return Status::AlreadyExists(Printable(Shown(f)) + " exists (use --force to overwrite)");
    }
    return Status::Ok();
  }

  // Moves a staged file to its place (or, `back`, from its place to the
  // staging directory). A file it replaces (--force) is exchanged with it,
  // so that moving back restores it.
  Status MoveOne(int out, const OpenFile& f, bool back) {
    VF_ASSIGN_OR_RETURN(UniqueFd staged, OpenParentDirectory(staging_fd_, f.parts, false));
    VF_ASSIGN_OR_RETURN(UniqueFd placed, OpenParentDirectory(out, f.parts, !back));
    const char* name = f.parts.back().c_str();
    if (back) {
      if (replaced_.count(&f))
        return ::renameat2(staged.get(), name, placed.get(), name, RENAME_EXCHANGE) == 0
                   ? Status::Ok()
                   : Status::FromErrno("putting back " + Printable(Shown(f)), errno);
      return ::renameat(placed.get(), name, staged.get(), name) == 0
                 ? Status::Ok()
                 : Status::FromErrno("moving " + Printable(Shown(f)) + " back", errno);
    }
    if (::renameat2(staged.get(), name, placed.get(), name, RENAME_NOREPLACE) == 0) return Status::Ok();
    if (errno != EEXIST || !force_) return MoveInto(staged.get(), name, placed.get(), name, false, Shown(f));
    if (::renameat2(staged.get(), name, placed.get(), name, RENAME_EXCHANGE) != 0)
      return Status::FromErrno("moving the unpacked object into " + Printable(Shown(f)), errno);
    replaced_.insert(&f);
    return Status::Ok();
  }

  Status SyncPath(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening the directory '" + dir + "' to sync it", errno);
    return SyncDirectory(fd.get(), dir);
  }

  // Syncs the directory `out_fd`/`dir` (`dir` empty: `out_fd` itself).
  Status SyncSubdirectory(int out_fd, std::vector<std::string> dir) {
    std::string shown = output_;
    for (const std::string& part : dir) shown += "/" + part;
    dir.push_back(".");  // OpenParentDirectory opens all but the last component
    VF_ASSIGN_OR_RETURN(UniqueFd fd, OpenParentDirectory(out_fd, dir, false));
    return SyncDirectory(fd.get(), shown);
  }

  // Opens a staged file again (the device, on its ring threads, and Finish).
  // The staging directory is private, so it is the file Open created.
  Result<UniqueFd> OpenStaged(const std::vector<std::string>& parts, const std::string& name) const {
    VF_ASSIGN_OR_RETURN(UniqueFd dir, OpenParentDirectory(staging_fd_, parts, /*create=*/false));
    UniqueFd fd(::openat(dir.get(), parts.back().c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening the staged file of " + Printable(name), errno);
    return fd;
  }

  // Runs `create`, which makes an entry in a staging directory, unless an
  // interrupt's cleanup has begun (then kCancelled, nothing made), and keeps
  // that cleanup from beginning meanwhile: an entry made while the cleanup
  // removes the directory kept it from going (the directory was left behind
  // after a SIGTERM, once in CI).
  Status CreateEntry(const std::function<Status()>& create) {
    return cleanup_ ? cleanup_->Exclusive(create) : create();
  }

  Result<RestoreTarget> OpenSkipped(const ObjectState& o) {
    if (skipped_dir_.fd() < 0) VF_RETURN_IF_ERROR(skipped_dir_.Create(output_, cleanup_));
    const std::string file = std::to_string(o.id);
    VF_RETURN_IF_ERROR(CreateEntry([&]() -> Status {
      UniqueFd created(
          ::openat(skipped_dir_.fd(), file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!created.valid())
        return Status::FromErrno("creating a scratch file for " + Printable(o.metadata.name), errno);
      return Status::Ok();
    }));
    files_[o.id].skipped = true;
    uint64_t size = o.size == kUnknownObjectSize ? FileDevice::kUnbounded : o.size;
    const std::string what = Printable(o.metadata.name) + " (not selected)";
    FileOpener open = [dir = skipped_dir_.fd(), file, what]() -> Result<UniqueFd> {
      UniqueFd fd(::openat(dir, file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (!fd.valid()) return Status::FromErrno("opening the scratch file of " + what, errno);
      return fd;
    };
    VF_ASSIGN_OR_RETURN(uint32_t bo, device_->ImportFile(std::move(open), 0, size, what));
    return RestoreTarget{device_, bo, /*zero_filled=*/true};
  }

  int staging_fd_;
  std::string output_;
  bool directory_forced_;
  bool force_;
  bool fsync_;
  FileDevice* device_;
  const ObjectSelector* filter_;
  OutputLimit* limit_;
  CleanupRegistry* cleanup_;
  StagingDirectory skipped_dir_;
  std::vector<ObjectMetadata> seen_;
  uint64_t kept_bytes_ = 0;
  std::map<uint32_t, OpenFile> files_;
  std::set<std::string> names_;
  std::set<const OpenFile*> replaced_;  // by Commit(): their old files are in the staging directory
};

// Unpacks `input`; with a `filter`, only the objects it selects become files.
Status UnpackFrom(ByteSource& input, const UnpackOptions& options, const PipelineOptions& pipeline,
                  const ObjectSelector* filter, UnpackReport* report) {
  ByteSource* source = &input;
  // One object, in order, to an fd: stdout, a device or a named pipe.
  auto unpack_sequentially = [&](int fd, const std::string& description) -> Status {
    VF_ASSIGN_OR_RETURN(uint64_t free_bytes, OutputLimit::FreeBytes(fd, description));
    OutputLimit limit(options.max_output, free_bytes, description);
    MemoryBudget budget(pipeline.max_memory);
    SequentialVisitor visitor(fd, description, filter, &limit, &budget);
    // Decoding is what costs: with more than one thread, frames are
    // decoded ahead in parallel and still written in order. An incremental
    // stream's base on S3 asks for more threads, to keep its reads in flight.
    const unsigned threads = WithMachineDefaults(pipeline).threads;
    // Digests are left to `verify`, as the restore graph leaves them: the
    // bytes written are each checked by their own hash.
    const ReadOptions read{.decode = true, .budget = &budget, .open_base = pipeline.open_base, .check_digests = false};
    VF_RETURN_IF_ERROR(ReadStreamDecodingAhead(*source, visitor, DecodeAheadOptions{threads, read, pipeline.note}));
    if (filter) VF_RETURN_IF_ERROR(filter->CheckEachMatched(visitor.seen(), source->Describe()));
    report->objects = visitor.objects();
    report->raw_bytes = visitor.bytes();
    return Status::Ok();
  };
  if (options.output == "-") return unpack_sequentially(STDOUT_FILENO, "stdout");
  if (options.output.empty()) return Status::InvalidArgument("no output given");
  std::string output = StripTrailingSlashes(options.output);
  struct stat st;
  bool exists = ::stat(output.c_str(), &st) == 0;
  // A character device (/dev/null) or a named pipe is written to, never
  // replaced: staging a file beside it and renaming it over the node would
  // turn /dev/null into a regular file.
  if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    UniqueFd fd(::open(output.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening '" + output + "'", errno);
    return unpack_sequentially(fd.get(), "'" + output + "'");
  }
  if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return Status::InvalidArgument("'" + output +
                                   "' is neither a file, a directory, a character device nor a named pipe");
  bool directory_forced = options.output.back() == '/' || (exists && S_ISDIR(st.st_mode));
  if (exists && !directory_forced && !options.force)
    return Status::AlreadyExists("'" + output + "' exists (use --force to overwrite)");

  CleanupRegistry* cleanup = options.transport.file.cleanup;
  StagingDirectory staging;
  VF_RETURN_IF_ERROR(staging.Create(output, cleanup));
  FileDevice device("unpack");
  VF_ASSIGN_OR_RETURN(uint64_t free_bytes, OutputLimit::FreeBytes(staging.fd(), "the staging directory"));
  OutputLimit limit(options.max_output, free_bytes, "the file system of " + Printable(output));
  StagedFiles files(staging.fd(), output, directory_forced, options.force, options.fsync, &device, filter, &limit,
                    cleanup);
  PipelineStats stats;
  ProgressBar bar("unpack", 0, options.progress);
  PipelineOptions with_progress = pipeline;
  with_progress.progress = [&](uint64_t done) { bar.Update(done); };
  VF_RETURN_IF_ERROR(RunRestore(
      source, {&device}, [&](const ObjectState& o) { return files.Open(o); }, with_progress, &stats,
      [&](const ObjectState& o) { return files.Finish(o); }));
  report->raw_bytes = filter ? files.kept_bytes() : stats.raw_bytes;
  report->seconds = stats.seconds;
  if (filter) VF_RETURN_IF_ERROR(filter->CheckEachMatched(files.seen(), source->Describe()));
  // An interrupt waits for the moves into place (all or nothing) to end.
  auto commit = [&] { return files.Commit(report); };
  return cleanup ? cleanup->Exclusive(commit) : commit();
}

// How the selected objects' frames are fetched: an s3:// object within the
// share of the budget the plan gave it (streamer/budget_plan.h), a file within a share taken
// here from the pipeline's budget (an eighth, 2 to 32 MiB).
SubStreamOptions FetchOptions(const std::string& uri, const TransportOptions& transport, uint64_t* pipeline_budget) {
  SubStreamOptions sub;
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  if (endpoint.ok() && endpoint->kind == Endpoint::Kind::kS3) {
    const S3Options& s3 = transport.s3;
    sub.fetch.memory_budget = s3.memory_budget;
    sub.fetch.request_size =
        std::min<uint64_t>(s3.range_size, std::max<uint64_t>(s3.memory_budget / 2, uint64_t{1} << 20));
    // A selection's ranges are small (a frame or a few, where objects
    // interleave), so request latency weighs more than with whole ranges:
    // twice the requests in flight (measured on RGW: -10% time at 16).
    sub.fetch.concurrency = 2 * s3::Concurrency(s3);
  } else {
    uint64_t share = std::clamp<uint64_t>(*pipeline_budget / 8, 2ull << 20, 32ull << 20);
    *pipeline_budget = *pipeline_budget > share ? *pipeline_budget - share : 0;
    sub.fetch.memory_budget = share;
    sub.fetch.request_size = std::min<uint64_t>(4ull << 20, share / 2);
    sub.fetch.concurrency = 4;
  }
  sub.max_range = sub.fetch.request_size;
  return sub;
}

// A selection from a stored stream with a seek index: only the selected
// objects' frames are fetched. Returns false (after a note) when the stream
// has to be read whole instead. `budget`: the command's plan, which explains
// an error about the fetch ahead's cut of it.
Result<bool> UnpackThroughIndex(const UnpackOptions& options, const TransportOptions& transport,
                                PipelineOptions pipeline, const BudgetPlan& budget, UnpackReport* report) {
  auto note = [&](const std::string& why) {
    if (options.note)
      options.note(why + ": reading the whole stream to restore " + options.select.Describe() +
                   " (every object is restored into the staging area, only those are kept)");
  };
  Result<std::unique_ptr<RandomAccessSource>> opened = OpenRandomAccess(options.input, transport);
  if (!opened.ok()) {
    if (opened.status().code() != Status::Code::kNotSupported) return opened.status();
    note(opened.status().message());
    return false;
  }
  auto counting = std::make_shared<CountingRandomAccess>(std::shared_ptr<RandomAccessSource>(std::move(*opened)));
  // Like the reader's other records, the index gets an eighth of the budget.
  Result<StoredStreamIndex> stored = ReadSeekIndex(*counting, std::max<uint64_t>(pipeline.max_memory / 8, 1u << 20));
  if (!stored.ok()) {
    if (stored.status().code() != Status::Code::kNotSupported)
      return stored.status().WithContext("reading the seek index");
    note(stored.status().message());
    return false;
  }
  VF_ASSIGN_OR_RETURN(std::set<uint32_t> ids, SelectObjects(stored->index, options.select, counting->Describe()));
  SubStreamOptions fetch = FetchOptions(options.input, transport, &pipeline.max_memory);
  SubStreamPlan plan;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSubStream(counting, *stored, ids, fetch, &plan));
  Status status = UnpackFrom(*source, options, pipeline, nullptr, report);
  if (status.code() == Status::Code::kCorruption || status.code() == Status::Code::kTruncated)
    status = status.WithContext(source->Describe() + "; frame numbers and stream offsets count in that selection");
  else status = budget.Explain(status, pipeline.max_memory, options.input + " (the selected frames, fetched ahead)");
  report->through_index = true;
  report->stream_bytes = stored->stream_size;
  report->bytes_read = counting->bytes();
  report->index_bytes = stored->bytes_read;
  report->stream_objects = stored->index.objects.size();
  report->ranges = plan.ranges;
  report->moved_refs = plan.moved_refs;
  VF_RETURN_IF_ERROR(status);
  return true;
}

}  // namespace

Status RunUnpack(const UnpackOptions& options, UnpackReport* report) {
  TransportOptions transport = options.transport;
  PipelineOptions pipeline = options.pipeline;
  const BudgetPlan plan = PlanPipelineBudget(&pipeline, options.input, &transport);
  const ObjectSelector* filter = options.select.all() ? nullptr : &options.select;
  // From the network, a base comes only from what the sender was offered
  // (the offer goes with the transport that listens).
  TransportOptions base_reads = options.transport;
  VF_ASSIGN_OR_RETURN(pipeline.open_base, ReaderBaseOpener(options.input, options.bases, options.base_store,
                                                           &base_reads, "unpack", plan.base_index));
  transport.net.base_offer = base_reads.net.base_offer;
  if (filter) {
    VF_ASSIGN_OR_RETURN(bool done, UnpackThroughIndex(options, transport, pipeline, plan, report));
    if (done) return Status::Ok();
  }
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(options.input, transport));
  Status status = plan.Explain(UnpackFrom(*source, options, pipeline, filter, report));
  Status told = source->Finish(status);
  VF_RETURN_IF_ERROR(status);
  return told.WithContext("the files are in place, but telling " + source->Describe() + " failed");
}

}  // namespace vramflow
