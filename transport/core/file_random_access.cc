// SPDX-License-Identifier: MIT
#include "transport/core/file_random_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/printable.h"
#include "common/unique_fd.h"

namespace vramflow {
namespace {

class FileRandomAccess final : public RandomAccessSource {
 public:
  FileRandomAccess(UniqueFd fd, uint64_t size, std::string path)
      : fd_(std::move(fd)), size_(size), path_(std::move(path)) {}

  uint64_t Size() const override { return size_; }
  std::string Describe() const override { return "'" + EscapedText(path_) + "'"; }

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override {
    if (offset >= size_) return size_t{0};
    const size_t want = static_cast<size_t>(std::min<uint64_t>(data.size(), size_ - offset));
    size_t done = 0;
    while (done < want) {
      ssize_t n = ::pread(fd_.get(), data.data() + done, want - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("reading " + Describe() + " at offset " + std::to_string(offset + done), errno);
      }
      if (n == 0) break;  // the file shrank since it was opened
      done += static_cast<size_t>(n);
    }
    return done;
  }

 private:
  UniqueFd fd_;
  uint64_t size_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessSource>> OpenFileRandomAccess(const std::string& path) {
  // A path may come from a stream (a BASE frame's location): shown escaped.
  const std::string shown = "'" + EscapedText(path) + "'";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("opening " + shown, errno);
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(shown + " is a directory");
  if (!S_ISREG(st.st_mode)) return Status::NotSupported(shown + " is not a regular file: it cannot be read at offsets");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("opening " + shown, errno);
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("opening " + shown, errno);
  if (!S_ISREG(st.st_mode))  // replaced between stat and open
    return Status::NotSupported(shown + " is not a regular file: it cannot be read at offsets");
  return std::unique_ptr<RandomAccessSource>(
      new FileRandomAccess(std::move(fd), static_cast<uint64_t>(st.st_size), path));
}

}  // namespace vramflow
