// SPDX-License-Identifier: MIT
#include "transport/open_uri.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "transport/core/background_sink.h"
#include "transport/core/file_random_access.h"
#include "transport/core/uri.h"
#include "transport/net/net_sink.h"
#include "transport/net/net_source.h"
#include "transport/s3/s3_sink.h"
#include "transport/s3/s3_source.h"

namespace vramflow {
namespace {

Status CheckFd(int fd, const std::string& uri) {
  if (::fcntl(fd, F_GETFD) < 0) return Status::FromErrno("'" + uri + "'", errno);
  return Status::Ok();
}

// PATH, -, fd:N.
Result<std::unique_ptr<ByteSink>> OpenLocalSink(const Endpoint& endpoint, const std::string& uri,
                                                const TransportOptions& options) {
  switch (endpoint.kind) {
    case Endpoint::Kind::kStdio:
      return OpenSinkSpec("-", options.file);
    case Endpoint::Kind::kFd:
      VF_RETURN_IF_ERROR(CheckFd(endpoint.fd, uri));
      return BorrowFdSink(endpoint.fd, uri);
    case Endpoint::Kind::kPath:
      return OpenFileSink(endpoint.path, options.file);
    default:
      return Status::Internal("'" + uri + "' is not a local destination");
  }
}

// A source that keeps its receiver (and so the listening socket, for
// reconnects and refusals) alive.
class ReceivedSource final : public ByteSource {
 public:
  ReceivedSource(std::unique_ptr<NetReceiver> receiver, std::unique_ptr<ByteSource> source)
      : receiver_(std::move(receiver)), source_(std::move(source)) {}
  Result<size_t> Read(std::span<uint8_t> data) override { return source_->Read(data); }
  std::string Describe() const override { return source_->Describe(); }
  Status Finish(const Status& outcome) override { return source_->Finish(outcome); }

 private:
  std::unique_ptr<NetReceiver> receiver_;
  std::unique_ptr<ByteSource> source_;
};

}  // namespace

Result<std::unique_ptr<ByteSink>> OpenSink(const std::string& uri, const TransportOptions& options) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  switch (endpoint.kind) {
    case Endpoint::Kind::kStdio:
    case Endpoint::Kind::kFd:
    case Endpoint::Kind::kPath: {
      VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenLocalSink(endpoint, uri, options));
      if (options.background_write_buffer == 0) return sink;
      return std::unique_ptr<ByteSink>(new BackgroundSink(std::move(sink), options.background_write_buffer));
    }
    case Endpoint::Kind::kUnix:
    case Endpoint::Kind::kTcp:
      return OpenNetSink(endpoint, options.net);
    case Endpoint::Kind::kSystemd:
      return Status::InvalidArgument("'" + uri + "' is a socket to listen on (--listen), not a destination");
    case Endpoint::Kind::kS3:
      return OpenS3Sink(endpoint.bucket, endpoint.key, options.s3);
  }
  return Status::Internal("unhandled endpoint kind");
}

Result<std::unique_ptr<ByteSource>> OpenSource(const std::string& uri, const TransportOptions& options) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  switch (endpoint.kind) {
    case Endpoint::Kind::kStdio:
      return OpenSourceSpec("-");
    case Endpoint::Kind::kFd:
      VF_RETURN_IF_ERROR(CheckFd(endpoint.fd, uri));
      return BorrowFdSource(endpoint.fd, uri);
    case Endpoint::Kind::kPath:
      return OpenFileSource(endpoint.path);
    case Endpoint::Kind::kUnix:
    case Endpoint::Kind::kTcp:
    case Endpoint::Kind::kSystemd: {
      VF_ASSIGN_OR_RETURN(std::unique_ptr<NetReceiver> receiver, NetReceiver::Listen(endpoint, options.net));
      if (options.on_listening) options.on_listening(receiver->uri());
      VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, receiver->Accept(options.accept_timeout));
      return std::unique_ptr<ByteSource>(new ReceivedSource(std::move(receiver), std::move(source)));
    }
    case Endpoint::Kind::kS3:
      return OpenS3Source(endpoint.bucket, endpoint.key, options.s3);
  }
  return Status::Internal("unhandled endpoint kind");
}

Result<std::unique_ptr<RandomAccessSource>> OpenRandomAccess(const std::string& uri, const TransportOptions& options) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  switch (endpoint.kind) {
    case Endpoint::Kind::kPath:
      return OpenFileRandomAccess(endpoint.path);
    case Endpoint::Kind::kS3:
      return OpenS3RandomAccess(endpoint.bucket, endpoint.key, options.s3);
    case Endpoint::Kind::kStdio:
    case Endpoint::Kind::kFd:
    case Endpoint::Kind::kUnix:
    case Endpoint::Kind::kTcp:
    case Endpoint::Kind::kSystemd:
      break;
  }
  return Status::NotSupported("'" + uri + "' cannot be read at offsets (only a file or an s3:// object can)");
}

}  // namespace vramflow
