// SPDX-License-Identifier: MIT
// CRIU's --stream control socket, the image streamer's end of it
// (CRIU: criu/img-streamer.c; criu-image-streamer; facts in
// ../shared/context/criu-image-streamer.md, section 2).
//
// CRIU connects once to <images-dir>/streamer-capture.sock (dump) or
// streamer-serve.sock (restore) and, for every image file it opens, sends a
// request naming the file. On dump it then sends the read end of a pipe it
// will write the file into; there is no reply. On restore the streamer
// replies whether the file exists and, if it does, CRIU sends the write end
// of a pipe for the streamer to fill. CRIU closes the connection at the end.
//
// Messages are a 4-byte length (CRIU writes host order, the streamer reads
// little-endian; the same on every host CRIU runs on) and a packed protobuf:
//   img_streamer_request_entry { required string filename = 1; }  (CRIU)
//   img_streamer_reply_entry   { required bool exists = 1; }       (streamer)
// A pipe travels as one fd with one dummy byte (SCM_RIGHTS).
//
// Everything CRIU sends is bounded before it is believed: messages over
// kMaxImageStreamerMessage bytes, names that are empty, hold a NUL or '/'
// or are longer than 4096 bytes, and fds that are not pipes are refused.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

class Listener;

// criu-image-streamer asserts messages stay under 10 KB.
inline constexpr uint32_t kMaxImageStreamerMessage = 10000;

// <images_dir>/streamer-capture.sock or streamer-serve.sock.
std::string ImageStreamerSocketPath(const std::string& images_dir, bool capture);

// The two messages' protobuf bodies (without the length).
std::vector<uint8_t> EncodeImageRequest(const std::string& filename);
Result<std::string> DecodeImageRequest(const std::vector<uint8_t>& body);
std::vector<uint8_t> EncodeImageReply(bool exists);
Result<bool> DecodeImageReply(const std::vector<uint8_t>& body);

// One length-prefixed message. RecvImageMessage returns an empty optional
// when the peer closed the connection cleanly before a new message; it waits
// up to `first_byte` for one to start (CRIU may work for long between two
// requests) and `timeout` for the rest of it.
Status SendImageMessage(int socket, const std::vector<uint8_t>& body, std::chrono::milliseconds timeout);
Result<std::optional<std::vector<uint8_t>>> RecvImageMessage(int socket, std::chrono::milliseconds first_byte,
                                                             std::chrono::milliseconds timeout);

// The streamer's end: the listening socket, then CRIU's one connection.
class CriuImageSocket {
 public:
  // Removes a stale socket file, binds and listens. The socket file is
  // removed again when the object goes. With `cleanup`, its removal is
  // registered there in the same step as the bind (CleanupEntry::Create),
  // so that an interrupt at any moment leaves no socket file behind.
  static Result<CriuImageSocket> Listen(const std::string& images_dir, bool capture,
                                        CleanupRegistry* cleanup = nullptr);

  CriuImageSocket(CriuImageSocket&&) noexcept;
  CriuImageSocket& operator=(CriuImageSocket&&) noexcept;
  ~CriuImageSocket();

  const std::string& path() const { return path_; }

  // Waits for CRIU to connect (up to `timeout`; negative: forever). One
  // CRIU per streamer, as criu-image-streamer: a second call is an error.
  // The socket file stays until the object goes (plugins look for it).
  Status Accept(std::chrono::milliseconds timeout);

  // The next file CRIU asks for; an empty optional once CRIU has closed the
  // connection (the end of its dump or restore).
  Result<std::optional<std::string>> NextRequest();
  // Restore: whether the file just asked for exists.
  Status Reply(bool exists);
  // The pipe end CRIU sends after a request (dump) or an `exists` reply
  // (restore): read end on dump, write end on restore.
  Result<UniqueFd> ReceivePipe(const std::string& filename);
  // Ends the connection from another thread (a NextRequest waiting on it
  // returns): the streamer gives up, and CRIU sees the socket close.
  void Shutdown();

 private:
  CriuImageSocket() = default;

  std::string path_;
  bool capture_ = true;
  CleanupEntry removal_;                // before listener_: goes after it
  std::unique_ptr<Listener> listener_;  // holds the socket file
  bool accepted_ = false;
  UniqueFd connection_;
};

}  // namespace vramflow
