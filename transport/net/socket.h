// SPDX-License-Identifier: MIT
// Stream sockets (TCP and UNIX) with deadlines: connect, listen, accept, and
// whole-buffer send and receive that give up with a clear error after a
// timeout instead of hanging on a peer that went away or stopped reading.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "transport/core/uri.h"

namespace vramflow {

struct SocketOptions {
  std::chrono::milliseconds connect_timeout{10000};
  // Longest wait for any progress of one send or receive; also the TCP
  // user timeout and the keepalive horizon.
  std::chrono::milliseconds io_timeout{30000};
  int buffer_bytes = 4 << 20;  // SO_SNDBUF/SO_RCVBUF request (the kernel may cap it)
};

// Connects to a kTcp or kUnix endpoint, tuned: TCP_NODELAY, large buffers,
// keepalive, TCP_USER_TIMEOUT, close-on-exec.
Result<UniqueFd> ConnectStream(const Endpoint& endpoint, const SocketOptions& options);

// The file of a UNIX socket this process bound, known by its path, device
// and inode: Remove() unlinks the path only while it still names that
// socket, not a file put there since (another listener's, after this one's
// was moved away). Removed once, by Remove() or on destruction; Remove() is
// safe from any thread (a signal's cleanup, tools/cli/interrupt.h).
class UnixSocketFile {
 public:
  explicit UnixSocketFile(std::string path);
  ~UnixSocketFile();
  UnixSocketFile(const UnixSocketFile&) = delete;
  UnixSocketFile& operator=(const UnixSocketFile&) = delete;

  // Records the socket file's identity (lstat of the bound file), before
  // anything may call Remove(); until then Remove() does nothing.
  void Bound(const struct stat& st);
  void Remove();
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::atomic<bool> bound_{false};
  std::atomic<bool> removed_{false};
};

// A listening socket. For UNIX sockets the path is created (mode 0600,
// whatever the umask: only this user may connect) on Open() and removed
// (UnixSocketFile) when the listener is destroyed or, with a `cleanup`
// registry, when the process is interrupted (common/cleanup_registry.h:
// SIGINT, SIGTERM and SIGHUP run no destructors); an existing socket file
// nobody listens on is replaced, any other existing file is an error. A
// kSystemd endpoint adopts the socket systemd passed
// (TakeSystemdListenSocket).
class Listener {
 public:
  static Result<Listener> Open(const Endpoint& endpoint, const SocketOptions& options,
                               CleanupRegistry* cleanup = nullptr);
  // Takes a socket that is already bound and listening (from systemd): it
  // must be a listening TCP or UNIX stream socket, else an error says what it
  // is. Made close-on-exec; a UNIX socket's file is left to its creator.
  static Result<Listener> Adopt(UniqueFd fd, const SocketOptions& options);
  Listener(Listener&&) noexcept;
  Listener& operator=(Listener&&) noexcept;
  ~Listener();

  // Waits up to `timeout` (negative: forever) for a connection; the accepted
  // socket is tuned like ConnectStream's. `peer` gets "1.2.3.4:5678" or "unix".
  Result<UniqueFd> Accept(std::chrono::milliseconds timeout, std::string* peer);
  // Makes a waiting Accept(), and every later one, return kCancelled at
  // once, so a thread that accepts in a loop can be stopped without waiting
  // out its poll timeout. Safe to call from any thread.
  void Interrupt();
  // The bound address as a URI (tcp://127.0.0.1:41234 after port 0).
  const std::string& uri() const { return uri_; }
  int fd() const { return fd_.get(); }
  // A UNIX socket (peers are checked by their user, no TLS), not TCP.
  bool is_unix() const { return is_unix_; }

 private:
  Listener() = default;
  UniqueFd fd_;
  UniqueFd wake_;                                // an eventfd: readable once Interrupt() was called
  std::shared_ptr<UnixSocketFile> socket_file_;  // UNIX: removed on destruction, or by the cleanup
  CleanupEntry socket_file_entry_;               // after socket_file_: released first
  std::string uri_;
  SocketOptions options_;
  bool is_unix_ = false;
};

// Sends all of `data` (MSG_NOSIGNAL). Fails with kTimedOut when no byte could
// be sent for options.io_timeout, kIoError on a reset or closed peer.
Status SendAll(int fd, std::span<const uint8_t> data, std::chrono::milliseconds timeout, const std::string& what);
// Receives exactly data.size() bytes. kTruncated when the peer closes first
// (the message says after how many bytes), kTimedOut as SendAll.
Status RecvAll(int fd, std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what);

}  // namespace vramflow
