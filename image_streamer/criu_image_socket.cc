// SPDX-License-Identifier: MIT
#include "image_streamer/criu_image_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/endian.h"
#include "common/printable.h"
#include "transport/net/fd_passing.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

constexpr std::chrono::milliseconds kMessageTimeout{30000};
// CRIU may work for long (dumping memory, restoring a tree) between two
// requests: the wait for the next one is bounded only by CRIU itself, which
// closes the connection when it ends or dies.
constexpr std::chrono::milliseconds kForever{-1};
constexpr size_t kMaxFilename = 4096;

void AppendVarint(std::vector<uint8_t>* out, uint64_t n) {
  do {
    out->push_back(static_cast<uint8_t>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    n >>= 7;
  } while (n);
}

Status CheckFilename(const std::string& name) {
  if (name.empty() || name.size() > kMaxFilename || name.find('\0') != std::string::npos ||
      name.find('/') != std::string::npos || name == "." || name == "..")
    return Status::Corruption("CRIU asked for an image file named '" + EscapedText(name) +
                              "': not a plain file name of 1 to 4096 bytes");
  return Status::Ok();
}

}  // namespace

std::string ImageStreamerSocketPath(const std::string& images_dir, bool capture) {
  return images_dir + (capture ? "/streamer-capture.sock" : "/streamer-serve.sock");
}

std::vector<uint8_t> EncodeImageRequest(const std::string& filename) {
  std::vector<uint8_t> out = {0x0a};  // field 1, length-delimited
  AppendVarint(&out, filename.size());
  out.insert(out.end(), filename.begin(), filename.end());
  return out;
}

Result<std::string> DecodeImageRequest(const std::vector<uint8_t>& body) {
  if (body.size() < 2 || body[0] != 0x0a) return Status::Corruption("image streamer request without a filename");
  size_t pos = 1;
  uint64_t len = 0;
  for (int shift = 0;; shift += 7) {
    if (pos >= body.size() || shift > 28) return Status::Corruption("image streamer request: bad filename length");
    len |= uint64_t{body[pos] & 0x7fu} << shift;
    if (!(body[pos++] & 0x80)) break;
  }
  if (len != body.size() - pos) return Status::Corruption("image streamer request of a bad size");
  std::string name(body.begin() + static_cast<ptrdiff_t>(pos), body.end());
  VF_RETURN_IF_ERROR(CheckFilename(name));
  return name;
}

std::vector<uint8_t> EncodeImageReply(bool exists) { return {0x08, static_cast<uint8_t>(exists ? 1 : 0)}; }

Result<bool> DecodeImageReply(const std::vector<uint8_t>& body) {
  if (body.size() != 2 || body[0] != 0x08 || body[1] > 1) return Status::Corruption("image streamer: bad reply");
  return body[1] == 1;
}

Status SendImageMessage(int socket, const std::vector<uint8_t>& body, std::chrono::milliseconds timeout) {
  std::vector<uint8_t> msg(4);
  StoreLE32(msg.data(), static_cast<uint32_t>(body.size()));
  msg.insert(msg.end(), body.begin(), body.end());
  return SendAll(socket, msg, timeout, "image streamer message");
}

Result<std::optional<std::vector<uint8_t>>> RecvImageMessage(int socket, std::chrono::milliseconds first_byte,
                                                             std::chrono::milliseconds timeout) {
  uint8_t len[4];
  Status s = RecvAll(socket, std::span<uint8_t>(len, 1), first_byte, "image streamer message");
  if (s.code() == Status::Code::kTruncated) return std::optional<std::vector<uint8_t>>();
  VF_RETURN_IF_ERROR(s);
  VF_RETURN_IF_ERROR(RecvAll(socket, std::span<uint8_t>(len + 1, 3), timeout, "image streamer message"));
  const uint32_t size = LoadLE32(len);
  if (size > kMaxImageStreamerMessage)
    return Status::Corruption("image streamer message of " + std::to_string(size) + " bytes (at most " +
                              std::to_string(kMaxImageStreamerMessage) + ")");
  std::vector<uint8_t> body(size);
  VF_RETURN_IF_ERROR(RecvAll(socket, body, timeout, "image streamer message"));
  return std::optional<std::vector<uint8_t>>(std::move(body));
}

Result<CriuImageSocket> CriuImageSocket::Listen(const std::string& images_dir, bool capture, CleanupRegistry* cleanup) {
  CriuImageSocket s;
  s.capture_ = capture;
  s.path_ = ImageStreamerSocketPath(images_dir, capture);
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint("unix:" + s.path_));
  auto bind = [&]() -> Status {
    VF_ASSIGN_OR_RETURN(Listener listener, Listener::Open(endpoint, SocketOptions{}));
    s.listener_ = std::make_unique<Listener>(std::move(listener));
    return Status::Ok();
  };
  VF_ASSIGN_OR_RETURN(s.removal_, CleanupEntry::Create(cleanup, bind, [path = s.path_] { ::unlink(path.c_str()); }));
  return s;
}

CriuImageSocket::CriuImageSocket(CriuImageSocket&&) noexcept = default;
CriuImageSocket& CriuImageSocket::operator=(CriuImageSocket&&) noexcept = default;
CriuImageSocket::~CriuImageSocket() = default;

Status CriuImageSocket::Accept(std::chrono::milliseconds timeout) {
  if (accepted_) return Status::InvalidArgument("the image streamer serves one CRIU connection");
  std::string peer;
  Result<UniqueFd> connection = listener_->Accept(timeout, &peer);
  if (!connection.ok())
    return connection.status().code() == Status::Code::kTimedOut
               ? Status::TimedOut("CRIU did not connect to " + path_ + " in time")
               : connection.status().WithContext("waiting for CRIU on " + path_);
  connection_ = std::move(*connection);
  // One CRIU per streamer: nothing more is accepted. The socket file stays
  // until the streamer ends, as criu-image-streamer's does: CRIU's plugins
  // (the amdgpu plugin among them) look for it to tell that --stream is on.
  accepted_ = true;
  return Status::Ok();
}

Result<std::optional<std::string>> CriuImageSocket::NextRequest() {
  VF_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> body,
                      RecvImageMessage(connection_.get(), kForever, kMessageTimeout));
  if (!body) return std::optional<std::string>();
  VF_ASSIGN_OR_RETURN(std::string name, DecodeImageRequest(*body));
  return std::optional<std::string>(std::move(name));
}

Status CriuImageSocket::Reply(bool exists) {
  return SendImageMessage(connection_.get(), EncodeImageReply(exists), kMessageTimeout);
}

void CriuImageSocket::Shutdown() {
  if (connection_.valid()) ::shutdown(connection_.get(), SHUT_RDWR);
}

Result<UniqueFd> CriuImageSocket::ReceivePipe(const std::string& filename) {
  uint8_t dummy;
  std::vector<UniqueFd> fds;
  VF_RETURN_IF_ERROR(RecvWithFds(connection_.get(), std::span<uint8_t>(&dummy, 1), &fds, kMessageTimeout,
                                 "the pipe of image file " + filename));
  if (fds.size() != 1)
    return Status::Corruption("CRIU sent " + std::to_string(fds.size()) + " fds with image file " + filename +
                              " (expected one pipe)");
  struct stat st;
  if (::fstat(fds[0].get(), &st) != 0) return Status::FromErrno("fstat of image file " + filename + "'s pipe", errno);
  if (!S_ISFIFO(st.st_mode))
    return Status::Corruption("CRIU sent image file " + filename + " on an fd that is not a pipe");
  return std::move(fds[0]);
}

}  // namespace vramflow
