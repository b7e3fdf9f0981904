// SPDX-License-Identifier: MIT
#include "transport/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "transport/net/deadline.h"
#include "transport/net/systemd_socket.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;

constexpr int kListenBacklog = 64;

void SetInt(int fd, int level, int option, int value) {
  // Tuning is best effort: a kernel that refuses an option still moves bytes.
  (void)::setsockopt(fd, level, option, &value, sizeof(value));
}

// Buffers for every socket; for TCP also no Nagle delay, keepalive and a user
// timeout so that a dead peer is noticed within about io_timeout.
void TuneSocket(int fd, int family, const SocketOptions& options) {
  if (options.buffer_bytes > 0) {
    SetInt(fd, SOL_SOCKET, SO_SNDBUF, options.buffer_bytes);
    SetInt(fd, SOL_SOCKET, SO_RCVBUF, options.buffer_bytes);
  }
  if (family != AF_INET && family != AF_INET6) return;
  SetInt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  SetInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  int64_t timeout_ms = options.io_timeout.count();
  if (timeout_ms <= 0) return;  // no horizon: the kernel's keepalive defaults
  // idle + interval * count ~= io_timeout, each at least 1 s (kernel maxima: 32767 s, 127 probes).
  int64_t seconds = std::clamp<int64_t>((timeout_ms + 999) / 1000, 1, 32767);
  constexpr int kProbes = 3;
  int64_t interval = std::max<int64_t>(1, seconds / 4);
  int64_t idle = std::max<int64_t>(1, seconds - interval * kProbes);
  SetInt(fd, IPPROTO_TCP, TCP_KEEPIDLE, static_cast<int>(idle));
  SetInt(fd, IPPROTO_TCP, TCP_KEEPINTVL, static_cast<int>(interval));
  SetInt(fd, IPPROTO_TCP, TCP_KEEPCNT, kProbes);
  SetInt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, static_cast<int>(std::min<int64_t>(timeout_ms, INT_MAX)));
}

// A host as it appears in a URI: IPv6 literals in brackets.
std::string UriHost(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

std::string TcpName(const std::string& host, uint16_t port) {
  return "tcp://" + UriHost(host) + ":" + std::to_string(port);
}

// Numeric host and port of an address; IPv4-mapped IPv6 shows as plain IPv4.
void NumericAddress(const sockaddr_storage& storage, std::string* host, uint16_t* port) {
  sockaddr_storage ss = storage;
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      sockaddr_in in4{};
      in4.sin_family = AF_INET;
      in4.sin_port = in6->sin6_port;
      std::memcpy(&in4.sin_addr, in6->sin6_addr.s6_addr + 12, 4);
      std::memset(&ss, 0, sizeof(ss));
      std::memcpy(&ss, &in4, sizeof(in4));
    }
  }
  socklen_t len = ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  char name[NI_MAXHOST] = "?";
  char service[NI_MAXSERV] = "0";
  (void)::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, name, sizeof(name), service, sizeof(service),
                      NI_NUMERICHOST | NI_NUMERICSERV);
  *host = name;
  *port = static_cast<uint16_t>(std::atoi(service));
}

Status UnixAddress(const std::string& path, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  if (path.find('\0') != std::string::npos)
    return Status::InvalidArgument("UNIX socket path '" + path + "' contains a NUL byte");
  if (path.size() >= sizeof(addr->sun_path))
    return Status::InvalidArgument("UNIX socket path '" + path + "' is too long (" + std::to_string(path.size()) +
                                   " bytes, at most " + std::to_string(sizeof(addr->sun_path) - 1) + ")");
  std::memcpy(addr->sun_path, path.data(), path.size());
  return Status::Ok();
}

// One non-blocking connect attempt, waiting up to connect_timeout.
Result<UniqueFd> ConnectAddress(int family, const sockaddr* addr, socklen_t len, const SocketOptions& options,
                                const std::string& name) {
  const std::string context = "connecting to " + name;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Status::FromErrno(context + ": socket", errno);
  TuneSocket(fd.get(), family, options);  // before connect, so the TCP window scale fits the buffers
  Deadline deadline(options.connect_timeout);
  for (;;) {
    if (::connect(fd.get(), addr, len) == 0) return fd;
    if (errno == EAGAIN && family == AF_UNIX) {
      // The listener's backlog is full: retry until the deadline.
      if (deadline.Expired()) break;
      std::this_thread::sleep_for(milliseconds(5));
      continue;
    }
    if (errno != EINPROGRESS && errno != EINTR) return Status::FromErrno(context, errno);
    VF_ASSIGN_OR_RETURN(bool ready, WaitFor(fd.get(), POLLOUT, deadline, context));
    if (!ready) break;
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
    if (err != 0) return Status::FromErrno(context, err);
    return fd;
  }
  return Status::TimedOut(context + ": no answer within " + FormatSeconds(options.connect_timeout));
}

Result<UniqueFd> ConnectTcp(const Endpoint& endpoint, const SocketOptions& options) {
  const std::string name = TcpName(endpoint.host, endpoint.port);
  if (endpoint.host.empty()) return Status::InvalidArgument("cannot connect to '" + endpoint.uri + "': no host given");
  if (endpoint.port == 0) return Status::InvalidArgument("cannot connect to '" + endpoint.uri + "': port 0");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &list);
  if (rc != 0)
    return Status::IoError("connecting to " + name + ": cannot resolve '" + endpoint.host +
                           "': " + (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(list, &::freeaddrinfo);
  Status last = Status::IoError("connecting to " + name + ": the name has no addresses");
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    auto fd = ConnectAddress(ai->ai_family, ai->ai_addr, ai->ai_addrlen, options, name);
    if (fd.ok()) return fd;
    last = fd.status();
  }
  return last;
}

Result<UniqueFd> ConnectUnix(const Endpoint& endpoint, const SocketOptions& options) {
  sockaddr_un addr;
  VF_RETURN_IF_ERROR(UnixAddress(endpoint.path, &addr));
  return ConnectAddress(AF_UNIX, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), options,
                        "unix:" + endpoint.path);
}

// A bound, listening, non-blocking socket; *err gets errno on failure. A UNIX
// socket file that bind() created is removed again if listen() fails.
Result<UniqueFd> BindAndListen(int family, const sockaddr* addr, socklen_t len, bool dual_stack,
                               const SocketOptions& options, const std::string& name, int* err) {
  const std::string context = "listening on " + name;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    *err = errno;
    return Status::FromErrno(context + ": socket", *err);
  }
  if (family != AF_UNIX) SetInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1);
  if (family == AF_INET6 && dual_stack) SetInt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0);
  // Accepted sockets inherit the buffer sizes, in time for the window scale.
  if (options.buffer_bytes > 0) {
    SetInt(fd.get(), SOL_SOCKET, SO_SNDBUF, options.buffer_bytes);
    SetInt(fd.get(), SOL_SOCKET, SO_RCVBUF, options.buffer_bytes);
  }
  if (::bind(fd.get(), addr, len) != 0) {
    *err = errno;
    return Status::FromErrno(context, *err);
  }
  // A UNIX socket is for this user only, whatever the umask (bind() applied
  // it). Before listen(): until then nobody can connect, so there is no
  // window in which the wider mode lets anyone in.
  if (family == AF_UNIX && ::chmod(reinterpret_cast<const sockaddr_un*>(addr)->sun_path, 0600) != 0) {
    *err = errno;
    ::unlink(reinterpret_cast<const sockaddr_un*>(addr)->sun_path);
    return Status::FromErrno(context + ": making the socket private (mode 0600)", *err);
  }
  if (::listen(fd.get(), kListenBacklog) != 0) {
    *err = errno;
    if (family == AF_UNIX) ::unlink(reinterpret_cast<const sockaddr_un*>(addr)->sun_path);
    return Status::FromErrno(context, *err);
  }
  return fd;
}

std::string PeerName(const sockaddr_storage& ss) {
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return "unix";
  std::string host;
  uint16_t port = 0;
  NumericAddress(ss, &host, &port);
  return UriHost(host) + ":" + std::to_string(port);
}

// A listening UNIX socket whose file appears at `path` only once it listens:
// it is bound under a hidden name in the same directory, made private and
// put to listen there, then renamed into place. Whoever waits for the file
// (a script's `[ -S ]`, CRIU started once the streamer's socket is there)
// can connect the moment it sees it; bound at `path` itself, the file was
// there a moment before listen() and a quick peer was refused. Where the
// hidden name would not fit in sun_path, the socket is bound in place.
// `bound` gets the socket file's identity (device and inode).
Result<UniqueFd> ListenAtUnixPath(const std::string& path, const SocketOptions& options, const std::string& name,
                                  struct stat* bound) {
  int err = 0;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  sockaddr_un addr;
  for (int attempt = 0;; ++attempt) {
    uint32_t random = 0;
    if (::getrandom(&random, sizeof random, 0) != sizeof random)
      return Status::FromErrno("listening on " + name + ": getrandom", errno);
    char hidden_name[16];
    std::snprintf(hidden_name, sizeof hidden_name, ".vf%08x", random);
    const std::string hidden = dir + hidden_name;
    if (!UnixAddress(hidden, &addr).ok()) break;
    Result<UniqueFd> fd =
        BindAndListen(AF_UNIX, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), false, options, name, &err);
    if (!fd.ok() && err == EADDRINUSE && attempt < 8) continue;  // the hidden name was taken
    if (!fd.ok()) return fd.status();
    if (::lstat(hidden.c_str(), bound) != 0) {  // a rename keeps the inode
      err = errno;
      ::unlink(hidden.c_str());
      return Status::FromErrno("listening on " + name + ": the socket file", err);
    }
    // Not over a file that appeared at `path` since it was found free or
    // stale; plain rename() only where the file system has no NOREPLACE.
    int renamed = ::renameat2(AT_FDCWD, hidden.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    if (renamed != 0 && errno == EINVAL) renamed = ::rename(hidden.c_str(), path.c_str());
    if (renamed != 0) {
      err = errno;
      ::unlink(hidden.c_str());
      if (err == EEXIST) return Status::IoError("cannot listen on " + name + ": '" + path + "' appeared meanwhile");
      return Status::FromErrno("listening on " + name + ": moving the socket into place", err);
    }
    return fd;
  }
  VF_RETURN_IF_ERROR(UnixAddress(path, &addr));
  VF_ASSIGN_OR_RETURN(UniqueFd fd, BindAndListen(AF_UNIX, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), false,
                                                 options, name, &err));
  if (::lstat(path.c_str(), bound) != 0) {
    err = errno;
    ::unlink(path.c_str());
    return Status::FromErrno("listening on " + name + ": the socket file", err);
  }
  return fd;
}

}  // namespace

UnixSocketFile::UnixSocketFile(std::string path) : path_(std::move(path)) {}

UnixSocketFile::~UnixSocketFile() { Remove(); }

void UnixSocketFile::Bound(const struct stat& st) {
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  bound_.store(true, std::memory_order_release);
}

void UnixSocketFile::Remove() {
  if (!bound_.load(std::memory_order_acquire) || removed_.exchange(true)) return;
  struct stat st;
  // Between the check and the unlink the path could be replaced once more:
  // no call unlinks by inode, and only this user can write where we bound.
  if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_)
    ::unlink(path_.c_str());
}

Result<UniqueFd> ConnectStream(const Endpoint& endpoint, const SocketOptions& options) {
  switch (endpoint.kind) {
    case Endpoint::Kind::kTcp:
      return ConnectTcp(endpoint, options);
    case Endpoint::Kind::kUnix:
      return ConnectUnix(endpoint, options);
    default:
      return Status::InvalidArgument("'" + endpoint.uri + "' is not a network endpoint (unix:PATH or tcp://HOST:PORT)");
  }
}

Result<Listener> Listener::Adopt(UniqueFd fd, const SocketOptions& options) {
  const std::string name = "the passed socket (fd " + std::to_string(fd.get()) + ")";
  int listening = 0, type = 0;
  socklen_t len = sizeof(listening);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0)
    return Status::FromErrno(name + " is not a socket", errno);
  len = sizeof(type);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return Status::FromErrno(name + ": SO_TYPE", errno);
  if (type != SOCK_STREAM)
    return Status::InvalidArgument(name + " is not a stream socket (a datagram socket? use ListenStream=)");
  if (!listening)
    return Status::InvalidArgument(name + " is a stream socket that does not listen (use ListenStream=, Accept=no)");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
    return Status::FromErrno(name + ": getsockname", errno);
  Listener listener;
  listener.options_ = options;
  if (bound.ss_family == AF_INET || bound.ss_family == AF_INET6) {
    std::string host;
    uint16_t port = 0;
    NumericAddress(bound, &host, &port);
    listener.uri_ = TcpName(host, port);
  } else if (bound.ss_family == AF_UNIX) {
    const auto& addr = reinterpret_cast<const sockaddr_un&>(bound);
    const size_t path_bytes =
        bound_len > offsetof(sockaddr_un, sun_path) ? bound_len - offsetof(sockaddr_un, sun_path) : 0;
    std::string path(addr.sun_path, strnlen(addr.sun_path, std::min(path_bytes, sizeof(addr.sun_path))));
    listener.uri_ = "unix:" + (path.empty() ? std::string("(abstract)") : path);
    listener.is_unix_ = true;
  } else {
    return Status::InvalidArgument(name + " is neither a TCP nor a UNIX socket (address family " +
                                   std::to_string(bound.ss_family) + ")");
  }
  int flags = ::fcntl(fd.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFD, flags | FD_CLOEXEC) != 0)
    return Status::FromErrno(name + ": close-on-exec", errno);
  listener.wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!listener.wake_.valid()) return Status::FromErrno("listening on " + name + ": eventfd", errno);
  listener.fd_ = std::move(fd);
  return listener;
}

Result<Listener> Listener::Open(const Endpoint& endpoint, const SocketOptions& options, CleanupRegistry* cleanup) {
  if (endpoint.kind == Endpoint::Kind::kSystemd) {
    VF_ASSIGN_OR_RETURN(UniqueFd passed, TakeSystemdListenSocket());
    return Adopt(std::move(passed), options);
  }
  Listener listener;
  listener.options_ = options;
  listener.wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!listener.wake_.valid()) return Status::FromErrno("listening on " + endpoint.uri + ": eventfd", errno);
  int err = 0;

  if (endpoint.kind == Endpoint::Kind::kTcp) {
    const std::string name = TcpName(endpoint.host, endpoint.port);
    if (endpoint.host.empty()) {
      // All addresses: one dual-stack IPv6 socket, or IPv4 only where IPv6 is off.
      sockaddr_in6 any6{};
      any6.sin6_family = AF_INET6;
      any6.sin6_addr = in6addr_any;
      any6.sin6_port = htons(endpoint.port);
      auto fd =
          BindAndListen(AF_INET6, reinterpret_cast<const sockaddr*>(&any6), sizeof(any6), true, options, name, &err);
      if (!fd.ok() && (err == EAFNOSUPPORT || err == EADDRNOTAVAIL || err == EPROTONOSUPPORT)) {
        sockaddr_in any4{};
        any4.sin_family = AF_INET;
        any4.sin_addr.s_addr = htonl(INADDR_ANY);
        any4.sin_port = htons(endpoint.port);
        fd = BindAndListen(AF_INET, reinterpret_cast<const sockaddr*>(&any4), sizeof(any4), false, options, name, &err);
      }
      if (!fd.ok()) return fd.status();
      listener.fd_ = std::move(fd).value();
    } else {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
      addrinfo* list = nullptr;
      int rc = ::getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &list);
      if (rc != 0)
        return Status::IoError("listening on " + name + ": cannot resolve '" + endpoint.host +
                               "': " + (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
      std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(list, &::freeaddrinfo);
      Status last = Status::IoError("listening on " + name + ": the name has no addresses");
      for (const addrinfo* ai = list; ai != nullptr && !listener.fd_.valid(); ai = ai->ai_next) {
        auto fd = BindAndListen(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false, options, name, &err);
        if (fd.ok()) listener.fd_ = std::move(fd).value();
        else last = fd.status();
      }
      if (!listener.fd_.valid()) return last;
    }
    // Report what was really bound: the numeric address and the actual port after port 0.
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof(bound);
    if (::getsockname(listener.fd_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
      return Status::FromErrno("listening on " + name + ": getsockname", errno);
    std::string host;
    uint16_t port = 0;
    NumericAddress(bound, &host, &port);
    listener.uri_ = TcpName(host, port);
    return listener;
  }

  if (endpoint.kind == Endpoint::Kind::kUnix) {
    const std::string& path = endpoint.path;
    const std::string name = "unix:" + path;
    sockaddr_un addr;
    VF_RETURN_IF_ERROR(UnixAddress(path, &addr));
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return Status::AlreadyExists("cannot listen on " + name + ": '" + path + "' exists and is not a socket");
      // A socket file: live if someone accepts connections on it, stale otherwise.
      UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!probe.valid()) return Status::FromErrno("listening on " + name + ": socket", errno);
      if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EAGAIN)
        return Status::IoError("another process is listening on " + name);
      if (errno != ECONNREFUSED) return Status::FromErrno("checking the existing socket " + name, errno);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        return Status::FromErrno("removing the stale socket '" + path + "'", errno);
    }
    // Created and registered for removal in one step (a signal between the
    // two would leave the file behind).
    auto file = std::make_shared<UnixSocketFile>(path);
    auto bind = [&]() -> Status {
      struct stat bound;
      VF_ASSIGN_OR_RETURN(listener.fd_, ListenAtUnixPath(path, options, name, &bound));
      file->Bound(bound);
      return Status::Ok();
    };
    VF_ASSIGN_OR_RETURN(listener.socket_file_entry_, CleanupEntry::Create(cleanup, bind, [file] { file->Remove(); }));
    listener.socket_file_ = std::move(file);
    listener.uri_ = name;
    listener.is_unix_ = true;
    return listener;
  }

  return Status::InvalidArgument("cannot listen on '" + endpoint.uri +
                                 "': not a network endpoint (unix:PATH or tcp://HOST:PORT)");
}

Listener::Listener(Listener&& other) noexcept
    : fd_(std::move(other.fd_)),
      wake_(std::move(other.wake_)),
      socket_file_(std::move(other.socket_file_)),
      socket_file_entry_(std::move(other.socket_file_entry_)),
      uri_(std::move(other.uri_)),
      options_(other.options_),
      is_unix_(other.is_unix_) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    if (socket_file_) socket_file_->Remove();
    fd_ = std::move(other.fd_);
    wake_ = std::move(other.wake_);
    socket_file_ = std::move(other.socket_file_);
    socket_file_entry_ = std::move(other.socket_file_entry_);
    uri_ = std::move(other.uri_);
    options_ = other.options_;
    is_unix_ = other.is_unix_;
  }
  return *this;
}

Listener::~Listener() {
  if (socket_file_) socket_file_->Remove();
}

Result<UniqueFd> Listener::Accept(milliseconds timeout, std::string* peer) {
  if (!fd_.valid()) return Status::Internal("Accept on a closed listener");
  Deadline deadline(timeout);
  for (;;) {
    pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, deadline.PollMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("waiting for a connection on " + uri_, errno);
    }
    if (fds[1].revents) return Status::Cancelled("stopped listening on " + uri_);
    if (n == 0) {
      if (deadline.Expired()) return Status::TimedOut("no connection on " + uri_ + " within " + FormatSeconds(timeout));
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // The connection went away before we took it, or a signal: wait for the next.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
        continue;
      return Status::FromErrno("accepting a connection on " + uri_, errno);
    }
    UniqueFd conn(fd);
    TuneSocket(fd, ss.ss_family, options_);
    if (peer != nullptr) *peer = PeerName(ss);
    return conn;
  }
}

void Listener::Interrupt() {
  if (!wake_.valid()) return;
  uint64_t one = 1;
  // Cannot fail short of a counter overflow; the fd stays readable either way.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

Status SendAll(int fd, std::span<const uint8_t> data, milliseconds timeout, const std::string& what) {
  return SendWithDeadline(fd, data, timeout, what, [fd](std::span<const uint8_t> rest) -> Result<ssize_t> {
    ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n < 0 ? -errno : n;
  });
}

Status RecvAll(int fd, std::span<uint8_t> data, milliseconds timeout, const std::string& what) {
  return ReceiveWithDeadline(fd, data, timeout, what, [fd](std::span<uint8_t> rest) -> Result<ssize_t> {
    ssize_t n = ::recv(fd, rest.data(), rest.size(), MSG_DONTWAIT);
    return n < 0 ? -errno : n;
  });
}

}  // namespace vramflow
