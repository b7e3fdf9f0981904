// SPDX-License-Identifier: MIT
#include "transport/core/fd_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>

#include "common/owner_tag.h"
#include "transport/core/file_mapping.h"
#include "transport/core/parallel_writes.h"
#include "transport/core/writeback_window.h"

namespace vramflow {
namespace {

Status WriteAll(int fd, std::span<const uint8_t> data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<size_t> ReadSome(int fd, std::span<uint8_t> data, const std::string& what) {
  for (;;) {
    ssize_t n = ::read(fd, data.data(), data.size());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Status::FromErrno("reading " + what, errno);
  }
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

class FileSink final : public ByteSink {
 public:
  FileSink(UniqueFd fd, std::string temp_path, std::string final_path, FileSinkOptions options, CleanupEntry entry)
      : fd_(std::move(fd)),
        temp_path_(std::move(temp_path)),
        final_path_(std::move(final_path)),
        options_(options),
        entry_(std::move(entry)) {}
  ~FileSink() override {
    if (!committed_) ::unlink(temp_path_.c_str());
  }
  // FileSinkOptions::writer_threads: the threads that write lent bytes.
  Status StartWriters(unsigned threads) {
    VF_ASSIGN_OR_RETURN(parallel_, ParallelWrites::Start(fd_.get(), threads, Describe(), [this](uint64_t bytes) {
                          writeback_.Wrote(fd_.get(), bytes);
                        }));
    return Status::Ok();
  }
  Status Write(std::span<const uint8_t> data) override {
    if (committed_) return Status::Internal("write to committed " + Describe());
    if (parallel_) return parallel_->Write(data);
    VF_RETURN_IF_ERROR(WriteAll(fd_.get(), data, Describe()));
    writeback_.Wrote(fd_.get(), data.size());
    return Status::Ok();
  }
  Result<uint64_t> WriteBorrowed(std::span<const uint8_t> data) override {
    if (!parallel_ || committed_) return ByteSink::WriteBorrowed(data);
    return parallel_->WriteBorrowed(data);
  }
  bool Released(uint64_t ticket) override { return !parallel_ || parallel_->Released(ticket); }
  void WaitReleased(uint64_t ticket) override {
    if (parallel_) parallel_->WaitReleased(ticket);
  }
  void DropBorrowed() override {
    if (parallel_) parallel_->DropBorrowed();
  }
  Status Commit() override {
    if (committed_) return Status::Ok();
    if (parallel_) {
      VF_RETURN_IF_ERROR(parallel_->Flush());
      parallel_.reset();  // its threads joined: nothing writes the file any more
    }
    if (options_.fsync && ::fsync(fd_.get()) != 0) return Status::FromErrno("fsync " + Describe(), errno);
    if (::close(fd_.Release()) != 0) return Status::FromErrno("closing " + Describe(), errno);
    auto move_into_place = [&]() -> Status {
      if (!options_.overwrite) {
        // link() fails if the target appeared meanwhile; rename() would clobber it.
        if (::link(temp_path_.c_str(), final_path_.c_str()) != 0)
          return Status::FromErrno("creating '" + final_path_ + "'", errno);
        ::unlink(temp_path_.c_str());
      } else if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
        return Status::FromErrno("renaming '" + temp_path_ + "' to '" + final_path_ + "'", errno);
      }
      committed_ = true;
      return Status::Ok();
    };
    // Never both: an interrupt removes the temporary file, or it is in place.
    VF_RETURN_IF_ERROR(options_.cleanup ? options_.cleanup->Exclusive(move_into_place) : move_into_place());
    entry_.Release();
    if (options_.fsync) {  // the new name survives a power loss only once its directory is synced
      const std::string dir_path = DirName(final_path_);
      UniqueFd dir(::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!dir.valid() || ::fsync(dir.get()) != 0)
        return Status::FromErrno("'" + final_path_ + "' is in place, but syncing its directory '" + dir_path + "'",
                                 errno);
    }
    return Status::Ok();
  }
  std::string Describe() const override { return "file '" + final_path_ + "'"; }
  bool Seekable() const override { return true; }

 private:
  UniqueFd fd_;
  std::string temp_path_;
  std::string final_path_;
  FileSinkOptions options_;
  WritebackWindow writeback_;  // the page cache holds a few MiB of the file, not all of it
  CleanupEntry entry_;         // removes temp_path_ if the process is interrupted
  bool committed_ = false;
  std::unique_ptr<ParallelWrites> parallel_;  // last: its threads, which use the members above, stop first
};

class FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::string description) : fd_(fd), description_(std::move(description)) {}
  Status Write(std::span<const uint8_t> data) override { return WriteAll(fd_, data, description_); }
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return description_; }

 private:
  int fd_;
  std::string description_;
};

class OwnedFdSink final : public ByteSink {
 public:
  OwnedFdSink(UniqueFd fd, std::string description) : fd_(std::move(fd)), description_(std::move(description)) {}
  Status Write(std::span<const uint8_t> data) override { return WriteAll(fd_.get(), data, description_); }
  Status Commit() override {
    if (fd_.valid() && ::close(fd_.Release()) != 0) return Status::FromErrno("closing " + description_, errno);
    return Status::Ok();
  }
  std::string Describe() const override { return description_; }

 private:
  UniqueFd fd_;
  std::string description_;
};

// Reads with read(2) until asked to read in place; a regular file that
// may be mapped (transport/core/file_mapping.h) is then mapped, from then on read
// from the mapping at the size it had, and where the fd stood. Destroyed,
// it moves the fd's offset to where those reads ended, as read(2) would
// have: a borrowed fd (stdin, fd:N) is then where its owner expects it.
class FdSource final : public ByteSource {
 public:
  FdSource(UniqueFd owned, int fd, std::string description)
      : owned_(std::move(owned)), fd_(fd), description_(std::move(description)) {}
  ~FdSource() override {
    if (mapping_) (void)::lseek(fd_, static_cast<off_t>(position_), SEEK_SET);
  }
  FdSource(const FdSource&) = delete;
  FdSource& operator=(const FdSource&) = delete;
  Result<size_t> Read(std::span<uint8_t> data) override {
    if (!mapping_) return ReadSome(fd_, data, description_);
    std::span<const uint8_t> bytes = Take(data.size());
    std::copy(bytes.begin(), bytes.end(), data.begin());
    return bytes.size();
  }
  std::optional<std::span<const uint8_t>> ReadInPlace(size_t size) override {
    if (!tried_mapping_) {
      tried_mapping_ = true;
      const off_t at = ::lseek(fd_, 0, SEEK_CUR);
      std::optional<FileMapping> mapping = at >= 0 ? FileMapping::Map(fd_) : std::nullopt;
      if (mapping && static_cast<uint64_t>(at) <= mapping->bytes().size()) {
        mapping_ = std::move(mapping);
        position_ = static_cast<size_t>(at);
      }
    }
    if (!mapping_) return std::nullopt;
    return Take(size);
  }
  void DoneBefore(const uint8_t* in_place) override {
    if (mapping_) mapping_->DropBefore(static_cast<uint64_t>(in_place - mapping_->bytes().data()));
  }
  std::string Describe() const override { return description_; }

 private:
  std::span<const uint8_t> Take(size_t size) {
    std::span<const uint8_t> rest = mapping_->bytes().subspan(position_);
    std::span<const uint8_t> taken = rest.first(std::min(size, rest.size()));
    position_ += taken.size();
    return taken;
  }

  UniqueFd owned_;
  int fd_;
  std::string description_;
  bool tried_mapping_ = false;
  std::optional<FileMapping> mapping_;
  size_t position_ = 0;  // in the mapping
};

}  // namespace

Result<std::unique_ptr<ByteSink>> OpenFileSink(const std::string& path, const FileSinkOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    // A device (/dev/null) or a named pipe: nothing to rename, write to it.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("opening '" + path + "'", errno);
    return std::unique_ptr<ByteSink>(new OwnedFdSink(UniqueFd(fd), "'" + path + "'"));
  }
  if (!options.overwrite && ::stat(path.c_str(), &st) == 0)
    return Status::AlreadyExists("'" + path + "' exists (use --force to overwrite)");
  (void)SweepDeadTemporaries(DirectoryOf(path), kTempMarker);
  const std::string owner = OwnerTag();
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char random[16];
    std::snprintf(random, sizeof(random), "-%08x", static_cast<unsigned>(rd()));
    std::string temp = path + kTempMarker + owner + random;
    int fd = -1;
    int open_errno = 0;
    // Created and registered in one step: an interrupt removes it, or it was
    // never created.
    Result<CleanupEntry> entry = CleanupEntry::Create(
        options.cleanup,
        [&] {
          fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
          if (fd >= 0) return Status::Ok();
          open_errno = errno;
          return Status::FromErrno("creating '" + temp + "'", open_errno);
        },
        [temp] { ::unlink(temp.c_str()); });
    if (entry.ok()) {
      auto sink = std::make_unique<FileSink>(UniqueFd(fd), temp, path, options, std::move(*entry));
      if (options.writer_threads > 1) VF_RETURN_IF_ERROR(sink->StartWriters(options.writer_threads));
      return std::unique_ptr<ByteSink>(std::move(sink));
    }
    if (open_errno != EEXIST) return entry.status();  // an error, or interrupted before the open
  }
  return Status::IoError("could not find a free temporary name beside '" + path + "'");
}

// Pipes default to 64 KiB, so a fast writer and reader take turns sleeping;
// a larger pipe lets each move a chunk per wake-up. Unprivileged processes
// may go up to /proc/sys/fs/pipe-max-size (1 MiB by default); a refusal just
// keeps the default.
void EnlargePipe(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  int size = 1 << 20;
  if (FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "r")) {
    int max = 0;
    if (std::fscanf(f, "%d", &max) == 1 && max > 0) size = std::min(size, max);
    std::fclose(f);
  }
  if (::fcntl(fd, F_GETPIPE_SZ) < size) (void)::fcntl(fd, F_SETPIPE_SZ, size);
}

std::unique_ptr<ByteSink> BorrowFdSink(int fd, std::string description) {
  EnlargePipe(fd);
  return std::make_unique<FdSink>(fd, std::move(description));
}

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("opening '" + path + "'", errno);
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("'" + path + "' is a directory");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<ByteSource>(new FdSource(UniqueFd(fd), fd, "'" + path + "'"));
}

std::unique_ptr<ByteSource> BorrowFdSource(int fd, std::string description) {
  EnlargePipe(fd);
  return std::make_unique<FdSource>(UniqueFd(), fd, std::move(description));
}

Result<std::unique_ptr<ByteSink>> OpenSinkSpec(const std::string& spec, const FileSinkOptions& options) {
  if (spec == "-") return BorrowFdSink(STDOUT_FILENO, "stdout");
  return OpenFileSink(spec, options);
}

Result<std::unique_ptr<ByteSource>> OpenSourceSpec(const std::string& spec) {
  if (spec == "-") return BorrowFdSource(STDIN_FILENO, "stdin");
  return OpenFileSource(spec);
}

}  // namespace vramflow
