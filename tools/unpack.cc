#include "tools/unpack.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "common/endian.h"
#include "streamer/amdgpu_pages.h"
#include "streamer/file_device.h"
#include "streamer/pipeline.h"
#include "streamer/stream_reader.h"
#include "tools/cli_util.h"
#include "tools/progress.h"
#include "tools/safe_path.h"
#include "transport/fd_stream.h"

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
  if (errno == EEXIST) return Status::AlreadyExists("'" + shown + "' exists (use --force to overwrite)");
  return Status::FromErrno("moving the unpacked object into '" + shown + "'", errno);
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

std::string ParentOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Writes the single object of a stream to an fd, in order.
class SequentialVisitor final : public StreamVisitor {
 public:
  SequentialVisitor(int fd, std::string description) : fd_(fd), description_(std::move(description)) {}
  Status OnObjectBegin(const ObjectState& o) override {
    if (++objects_ > 1)
      return Status::InvalidArgument("the stream holds more than one object (object " + std::to_string(o.id) + " '" +
                                     o.metadata.name + "'); unpack to a directory instead of " + description_);
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
    if (e.header.offset != next_)
      return Status::InvalidArgument("chunks arrive out of order (offset " + std::to_string(e.header.offset) +
                                     ", expected " + std::to_string(next_) + "); unpack to a file instead of " +
                                     description_);
    if (e.dedup)  // its bytes were written to stdout already; nothing to copy them from
      return Status::NotSupported("the stream uses dedup references (frame at stream offset " +
                                  std::to_string(e.stream_offset) + "); unpack to a file instead of " + description_);
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

 private:
  Status Write(std::span<const uint8_t> data) {
    auto sink = BorrowFdSink(fd_, description_);
    return sink->Write(data);
  }
  int fd_;
  std::string description_;
  uint64_t objects_ = 0;
  uint64_t next_ = 0;
  bool legacy_ = false;
};

// The files of an unpack, created in a staging directory as objects begin,
// sized when they end, and moved to their final places by Commit().
class StagedFiles {
 public:
  StagedFiles(int staging_fd, std::string output, bool directory_forced, bool force, FileDevice* device)
      : staging_fd_(staging_fd), output_(std::move(output)), directory_forced_(directory_forced), force_(force),
        device_(device) {}

  // Creates the staged file of an object that begins; its content goes
  // through the device, after the legacy header if it has one.
  Result<RestoreTarget> Open(const ObjectState& o) {
    VF_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitSafeRelativePath(o.metadata.name));
    if (!names_.insert(o.metadata.name).second)
      return Status::InvalidArgument("object name '" + o.metadata.name + "' appears twice in the stream");
    if (directory_forced_ && !force_) {
      std::string target = output_ + "/" + o.metadata.name;
      struct stat st;
      if (::lstat(target.c_str(), &st) == 0)
        return Status::AlreadyExists("'" + target + "' exists (use --force to overwrite)");
    }
    VF_ASSIGN_OR_RETURN(UniqueFd dir, OpenParentDirectory(staging_fd_, parts, /*create=*/true));
    int fd = ::openat(dir.get(), parts.back().c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("creating staged file for '" + o.metadata.name + "'", errno);
    OpenFile& f = files_[o.id];
    f.fd.Reset(fd);
    f.parts = std::move(parts);
    const std::string* legacy = o.metadata.Find(kLegacyFormatKey);
    if (legacy && *legacy == kLegacyFormatAmdgpuPages) {
      if (o.size == kUnknownObjectSize) return Status::NotSupported("legacy image of unknown size");
      f.header = kAmdgpuPagesHeaderSize;
      const std::string* order = o.metadata.Find(kLegacyByteOrderKey);
      f.legacy_little_endian = !order || *order != "be";
    }
    uint64_t size = o.size == kUnknownObjectSize ? FileDevice::kUnbounded : o.size;
    VF_ASSIGN_OR_RETURN(uint32_t bo, device_->ImportFileRange(fd, f.header, size, "'" + o.metadata.name + "'"));
    return RestoreTarget{device_, bo, /*zero_filled=*/true};
  }

  // Writes the legacy header and sets the final size (zero runs at the end
  // of an object are holes until then).
  Status Finish(const ObjectState& o) {
    OpenFile& f = files_.at(o.id);
    const std::string what = "'" + o.metadata.name + "'";
    if (f.header) {
      uint8_t header[kAmdgpuPagesHeaderSize];
      EncodeAmdgpuPagesHeader(o.size, f.legacy_little_endian, header);
      VF_RETURN_IF_ERROR(PwriteAll(f.fd.get(), header, 0, what));
    }
    if (::ftruncate(f.fd.get(), static_cast<off_t>(f.header + o.size)) != 0)
      return Status::FromErrno("sizing " + what, errno);
    if (::close(f.fd.Release()) != 0) return Status::FromErrno("closing " + what, errno);
    return Status::Ok();
  }

  // Moves the staged files to their final places.
  Status Commit(UnpackReport* report) {
    report->objects = files_.size();
    if (!directory_forced_ && files_.size() == 1) {
      const OpenFile& f = files_.begin()->second;
      VF_ASSIGN_OR_RETURN(UniqueFd from, OpenParentDirectory(staging_fd_, f.parts, false));
      VF_RETURN_IF_ERROR(MoveInto(from.get(), f.parts.back(), AT_FDCWD, output_, force_, output_));
      report->written.push_back(output_);
      return Status::Ok();
    }
    if (files_.empty() && !directory_forced_) return Status::Ok();
    if (::mkdir(output_.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::FromErrno("creating directory '" + output_ + "'", errno);
    UniqueFd out(::open(output_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!out.valid()) return Status::FromErrno("opening directory '" + output_ + "'", errno);
    for (const auto& [id, f] : files_) {
      std::string shown = output_ + "/";
      for (size_t i = 0; i < f.parts.size(); ++i) shown += (i ? "/" : "") + f.parts[i];
      VF_ASSIGN_OR_RETURN(UniqueFd from, OpenParentDirectory(staging_fd_, f.parts, false));
      VF_ASSIGN_OR_RETURN(UniqueFd to, OpenParentDirectory(out.get(), f.parts, true));
      VF_RETURN_IF_ERROR(MoveInto(from.get(), f.parts.back(), to.get(), f.parts.back(), force_, shown));
      report->written.push_back(shown);
    }
    return Status::Ok();
  }

 private:
  struct OpenFile {
    UniqueFd fd;
    std::vector<std::string> parts;
    uint64_t header = 0;  // bytes of legacy header before the content
    bool legacy_little_endian = true;
  };
  int staging_fd_;
  std::string output_;
  bool directory_forced_;
  bool force_;
  FileDevice* device_;
  std::map<uint32_t, OpenFile> files_;
  std::set<std::string> names_;
};

// A private directory beside the output, removed with its contents on exit.
class StagingDirectory {
 public:
  ~StagingDirectory() {
    fd_.Reset();
    if (!path_.empty()) ::nftw(path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
  Status Create(const std::string& beside) {
    std::string base = beside.substr(beside.find_last_of('/') + 1);
    std::string pattern = ParentOf(beside) + "/." + base + ".vf-unpack-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) return Status::FromErrno("creating a staging directory beside '" + beside + "'", errno);
    path_ = buf.data();
    fd_.Reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd_.valid()) return Status::FromErrno("opening '" + path_ + "'", errno);
    return Status::Ok();
  }
  int fd() const { return fd_.get(); }

 private:
  std::string path_;
  UniqueFd fd_;
};

Status UnpackFrom(ByteSource& input, const UnpackOptions& options, const PipelineOptions& pipeline,
                  UnpackReport* report) {
  ByteSource* source = &input;
  if (options.output == "-") {
    SequentialVisitor visitor(STDOUT_FILENO, "stdout");
    VF_RETURN_IF_ERROR(ReadStream(*source, visitor));
    report->objects = visitor.objects();
    report->raw_bytes = visitor.bytes();
    return Status::Ok();
  }
  if (options.output.empty()) return Status::InvalidArgument("no output given");
  std::string output = StripTrailingSlashes(options.output);
  struct stat st;
  bool exists = ::stat(output.c_str(), &st) == 0;
  bool directory_forced = options.output.back() == '/' || (exists && S_ISDIR(st.st_mode));
  if (exists && !directory_forced && !options.force)
    return Status::AlreadyExists("'" + output + "' exists (use --force to overwrite)");

  StagingDirectory staging;
  VF_RETURN_IF_ERROR(staging.Create(output));
  FileDevice device("unpack");
  StagedFiles files(staging.fd(), output, directory_forced, options.force, &device);
  PipelineStats stats;
  ProgressBar bar("unpack", 0, options.progress);
  PipelineOptions with_progress = pipeline;
  with_progress.progress = [&](uint64_t done) { bar.Update(done); };
  VF_RETURN_IF_ERROR(RunRestore(
      source, {&device}, [&](const ObjectState& o) { return files.Open(o); }, with_progress, &stats,
      [&](const ObjectState& o) { return files.Finish(o); }));
  report->raw_bytes = stats.raw_bytes;
  report->seconds = stats.seconds;
  return files.Commit(report);
}

}  // namespace

Status RunUnpack(const UnpackOptions& options, UnpackReport* report) {
  TransportOptions transport = options.transport;
  PipelineOptions pipeline = options.pipeline;
  ShareBudget(options.input, &pipeline.max_memory, &transport);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(options.input, transport));
  Status status = ExplainBudgetShare(UnpackFrom(*source, options, pipeline, report), options.pipeline.max_memory,
                                     pipeline.max_memory, options.input);
  Status told = source->Finish(status);
  VF_RETURN_IF_ERROR(status);
  return told.WithContext("the files are in place, but telling " + source->Describe() + " failed");
}

}  // namespace vramflow
