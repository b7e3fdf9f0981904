// SPDX-License-Identifier: MIT
#include "plugin/image_store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "common/unique_fd.h"
#include "transport/core/fd_stream.h"
#include "transport/core/uri.h"

namespace vramflow {
namespace {

constexpr char kNamePlaceholder[] = "{name}";

bool HasNamePlaceholder(const std::string& pattern) { return pattern.find(kNamePlaceholder) != std::string::npos; }

// `pattern` with every "{name}" replaced by `name`.
std::string SubstituteName(const std::string& pattern, const std::string& name) {
  std::string uri = pattern;
  const size_t length = sizeof kNamePlaceholder - 1;
  for (size_t pos = 0; (pos = uri.find(kNamePlaceholder, pos)) != std::string::npos; pos += name.size())
    uri.replace(pos, length, name);
  return uri;
}

class DirStore final : public ImageStore {
 public:
  DirStore(std::string dir, FileSinkOptions options) : dir_(std::move(dir)), options_(options) {
    // A dump replaces the images and streams of an earlier dump into the
    // same directory (periodic checkpoints, --leave-running), as CRIU does.
    options_.overwrite = true;
  }

  Result<std::unique_ptr<ByteSink>> Create(const std::string& name) override {
    return OpenFileSink(Path(name), options_);
  }
  Result<std::unique_ptr<ByteSource>> Open(const std::string& name) override {
    struct stat st;
    if (::stat(Path(name).c_str(), &st) != 0) {
      if (errno == ENOENT) return std::unique_ptr<ByteSource>();
      return Status::FromErrno("image " + Path(name), errno);
    }
    return OpenFileSource(Path(name));
  }
  std::string Describe() const override { return "images directory " + dir_; }
  std::string Location(const std::string& name) const override { return Path(name); }

 private:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
  FileSinkOptions options_;
};

// Owns the pipe CRIU handed out and reads or writes through it.
class PipeSink final : public ByteSink {
 public:
  PipeSink(UniqueFd fd, std::string name) : fd_(std::move(fd)), sink_(BorrowFdSink(fd_.get(), std::move(name))) {}
  Status Write(std::span<const uint8_t> data) override { return sink_->Write(data); }
  Status Commit() override {
    VF_RETURN_IF_ERROR(sink_->Commit());
    fd_.Reset();  // EOF tells the streamer the file is complete
    return Status::Ok();
  }
  std::string Describe() const override { return sink_->Describe(); }

 private:
  UniqueFd fd_;
  std::unique_ptr<ByteSink> sink_;
};

class PipeSource final : public ByteSource {
 public:
  PipeSource(UniqueFd fd, std::string name) : fd_(std::move(fd)), source_(BorrowFdSource(fd_.get(), std::move(name))) {}
  Result<size_t> Read(std::span<uint8_t> data) override { return source_->Read(data); }
  std::string Describe() const override { return source_->Describe(); }

 private:
  UniqueFd fd_;
  std::unique_ptr<ByteSource> source_;
};

class StreamerStore final : public ImageStore {
 public:
  StreamerStore(StreamerOpenFn open, bool dump) : open_(open), dump_(dump) {}

  Result<std::unique_ptr<ByteSink>> Create(const std::string& name) override {
    if (!dump_) return Status::Internal("CRIU's image streamer is open for restore, not for writing " + name);
    VF_ASSIGN_OR_RETURN(UniqueFd fd, OpenPipe(name, O_WRONLY | O_CREAT | O_TRUNC));
    if (!fd.valid()) return Status::IoError("CRIU's image streamer refused to store " + name);
    return std::unique_ptr<ByteSink>(new PipeSink(std::move(fd), "image " + name + " (CRIU image streamer)"));
  }
  Result<std::unique_ptr<ByteSource>> Open(const std::string& name) override {
    if (dump_) return Status::Internal("CRIU's image streamer is open for dump, not for reading " + name);
    VF_ASSIGN_OR_RETURN(UniqueFd fd, OpenPipe(name, O_RDONLY));
    if (!fd.valid()) return std::unique_ptr<ByteSource>();
    return std::unique_ptr<ByteSource>(new PipeSource(std::move(fd), "image " + name + " (CRIU image streamer)"));
  }
  std::string Describe() const override { return "CRIU's image streamer"; }

 private:
  // An invalid fd: no such image (restore).
  Result<UniqueFd> OpenPipe(const std::string& name, int flags) {
    std::string copy = name;  // CRIU's prototype takes a char*
    int fd = open_(copy.data(), flags);
    if (fd >= 0) return UniqueFd(fd);
    if (fd == -ENOENT) return UniqueFd();
    return Status::IoError("CRIU's image streamer could not open " + name + " (" + std::to_string(fd) + ")");
  }
  StreamerOpenFn open_;
  bool dump_;
};

// `options` for a stream named `name` (a network sender sends the name).
TransportOptions WithStreamName(TransportOptions options, const std::string& name) {
  options.net.name = name;
  return options;
}

// A URI without {name}. A network address carries every image's stream,
// one session after another, each named after its image so that the
// receiver (`vramflow recv --output-dir`) stores it under that name; on
// restore it is listened on for one stream, which must carry the image's
// name if it has one. Any other URI (s3://, fd:N, -) holds one stream.
class UriStore final : public ImageStore {
 public:
  UriStore(std::string target, TransportOptions options, bool network)
      : target_(std::move(target)), options_(std::move(options)), network_(network) {}

  Result<std::unique_ptr<ByteSink>> Create(const std::string& name) override {
    if (!network_) VF_RETURN_IF_ERROR(TakeOnlyStream(name));
    return OpenSink(target_, Named(name));
  }
  Result<std::unique_ptr<ByteSource>> Open(const std::string& name) override {
    VF_RETURN_IF_ERROR(TakeOnlyStream(name));
    return OpenSource(target_, Named(name));
  }
  std::string Describe() const override { return "VRAMFLOW_TARGET " + target_; }
  std::string Location(const std::string&) const override { return network_ ? "" : target_; }

 private:
  Status TakeOnlyStream(const std::string& name) {
    if (!used_.empty() && !used_.count(name))
      return Status::InvalidArgument(
          "VRAMFLOW_TARGET=" + target_ + " carries one stream here, but " + name + " is another one after " +
          *used_.begin() + " (one stream per GPU): put {name} in the URI to give each its own" +
          (network_ ? ", or receive the dump with `vramflow recv --output-dir DIR` and restore from DIR" : ""));
    used_.insert(name);
    return Status::Ok();
  }
  TransportOptions Named(const std::string& name) const { return WithStreamName(options_, name); }
  std::string target_;
  TransportOptions options_;
  bool network_;
  std::set<std::string> used_;
};

class TemplateStore final : public ImageStore {
 public:
  TemplateStore(std::string target, TransportOptions options)
      : target_(std::move(target)), options_(std::move(options)) {}

  Result<std::unique_ptr<ByteSink>> Create(const std::string& name) override {
    return OpenSink(Uri(name), Named(name));
  }
  Result<std::unique_ptr<ByteSource>> Open(const std::string& name) override {
    std::string uri = Uri(name);
    VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
    if (endpoint.kind == Endpoint::Kind::kPath) {
      struct stat st;
      if (::stat(endpoint.path.c_str(), &st) != 0 && errno == ENOENT) return std::unique_ptr<ByteSource>();
    }
    return OpenSource(uri, Named(name));
  }
  std::string Describe() const override { return "VRAMFLOW_TARGET " + target_; }
  std::string Location(const std::string& name) const override {
    Result<Endpoint> endpoint = ParseEndpoint(Uri(name));
    return endpoint.ok() && !endpoint->is_network() ? Uri(name) : "";
  }

 private:
  // Network streams carry their image's name too (see UriStore).
  TransportOptions Named(const std::string& name) const { return WithStreamName(options_, name); }
  std::string Uri(const std::string& name) const { return SubstituteName(target_, name); }
  std::string target_;
  TransportOptions options_;
};

}  // namespace

std::unique_ptr<ImageStore> DirectoryStore(std::string dir, FileSinkOptions options) {
  return std::make_unique<DirStore>(std::move(dir), options);
}

std::unique_ptr<ImageStore> CriuStreamerStore(StreamerOpenFn open, bool dump) {
  return std::make_unique<StreamerStore>(open, dump);
}

Result<std::unique_ptr<ImageStore>> TargetStore(const std::string& target, const TransportOptions& given) {
  // A dump replaces its own earlier streams (files and s3:// objects are
  // replaced whole, once the new one is complete); a receiver decides for
  // itself (docs/CLI.md, recv).
  TransportOptions options = given;
  options.file.overwrite = true;
  options.s3.overwrite = true;
  if (HasNamePlaceholder(target)) return std::unique_ptr<ImageStore>(std::make_unique<TemplateStore>(target, options));
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(target));
  if (endpoint.kind == Endpoint::Kind::kPath) {
    FileSinkOptions file = options.file;
    return DirectoryStore(endpoint.path, file);
  }
  return std::unique_ptr<ImageStore>(std::make_unique<UriStore>(target, options, endpoint.is_network()));
}

Result<std::string> ImageLocation(const std::string& pattern, const std::string& name) {
  if (HasNamePlaceholder(pattern)) return SubstituteName(pattern, name);
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(pattern));
  if (endpoint.kind == Endpoint::Kind::kPath) return endpoint.path + "/" + name;
  return pattern;
}

bool NamesOneImage(const std::string& pattern) {
  if (HasNamePlaceholder(pattern)) return false;
  Result<Endpoint> endpoint = ParseEndpoint(pattern);
  return !endpoint.ok() || endpoint->kind != Endpoint::Kind::kPath;
}

}  // namespace vramflow
