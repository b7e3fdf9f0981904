// SPDX-License-Identifier: MIT
#include "tests/support/s3_fault_proxy.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>
#include <string_view>

#include "common/unique_fd.h"

namespace vramflow::testing {
namespace {

constexpr size_t kMaxHead = 64 << 10;      // a request or reply head beyond this is refused
constexpr size_t kRelayChunk = 256 << 10;  // bytes moved per recv/send while relaying a body

// A parsed request or reply head. For a request, first/second/third are
// method, target, version; for a reply, version, status, reason.
struct Head {
  std::string first, second, third;
  std::map<std::string, std::string> headers;  // lower-case names
  bool valid = false;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  bool Chunked() const {
    std::string te = Header("transfer-encoding");
    for (char& c : te) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return te.find("chunked") != std::string::npos;
  }
  std::optional<uint64_t> ContentLength() const {
    std::string v = Header("content-length");
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(v);
  }
};

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos || e < b ? "" : std::string(s.substr(b, e - b + 1));
}

Head ParseHead(const std::string& text) {
  Head head;
  size_t eol = text.find("\r\n");
  if (eol == std::string::npos) return head;
  std::string_view line(text.data(), eol);
  size_t a = line.find(' ');
  size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (a == std::string_view::npos) return head;
  head.first = std::string(line.substr(0, a));
  head.second = std::string(line.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1));
  head.third = b == std::string_view::npos ? "" : std::string(line.substr(b + 1));
  for (size_t pos = eol + 2; pos < text.size();) {
    size_t end = text.find("\r\n", pos);
    if (end == std::string::npos || end == pos) break;
    std::string_view header(text.data() + pos, end - pos);
    size_t colon = header.find(':');
    if (colon != std::string_view::npos) {
      std::string name(header.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      head.headers[name] = Trim(header.substr(colon + 1));
    }
    pos = end + 2;
  }
  head.valid = true;
  return head;
}

// An S3 error reply, as S3 sends it: XML body, connection kept open.
std::string ErrorReply(FaultProxy::Fault fault) {
  const bool slow = fault == FaultProxy::Fault::kSlowDown503;
  const std::string body = std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>") +
                           (slow ? "SlowDown" : "InternalError") + "</Code><Message>" +
                           (slow ? "Please reduce your request rate." : "We encountered an internal error.") +
                           " (injected by the test proxy)</Message><RequestId>fault-proxy</RequestId></Error>";
  return std::string(slow ? "HTTP/1.1 503 Slow Down" : "HTTP/1.1 500 Internal Server Error") +
         "\r\nContent-Type: application/xml\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

int FaultStatus(FaultProxy::Fault fault) { return fault == FaultProxy::Fault::kSlowDown503 ? 503 : 500; }

void NoDelay(int fd) {
  int one = 1;
  // Best effort: without it a head and its body sent apart may wait for a delayed ACK.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Connects to host:port; an invalid fd when nothing answers.
UniqueFd Connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return UniqueFd();
  UniqueFd fd;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (s.valid() && ::connect(s.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      fd = std::move(s);
      break;
    }
  }
  ::freeaddrinfo(list);
  if (fd.valid()) NoDelay(fd.get());
  return fd;
}

}  // namespace

// A socket with a read buffer: heads are read up to their blank line, bodies
// relayed to another connection (or dropped) by length, by chunk or to the end.
class FaultProxy::Connection {
 public:
  explicit Connection(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }

  // The next head, blank line included; nullopt at the end of the connection.
  std::optional<std::string> ReadHead() { return ReadUntil("\r\n\r\n", kMaxHead); }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Moves exactly `n` bytes to `to` (nullptr: reads and drops them).
  bool Relay(uint64_t n, Connection* to) {
    size_t buffered = static_cast<size_t>(std::min<uint64_t>(n, buf_.size()));
    if (buffered > 0) {
      if (to && !to->Send(std::string_view(buf_).substr(0, buffered))) return false;
      buf_.erase(0, buffered);
      n -= buffered;
    }
    std::string chunk(kRelayChunk, '\0');
    while (n > 0) {
      ssize_t got = ::recv(fd_.get(), chunk.data(), static_cast<size_t>(std::min<uint64_t>(n, chunk.size())), 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      if (to && !to->Send(std::string_view(chunk.data(), static_cast<size_t>(got)))) return false;
      n -= static_cast<uint64_t>(got);
    }
    return true;
  }

  // A chunked body: size lines, data, the last chunk and its trailers (to
  // nullptr: read and dropped).
  bool RelayChunked(Connection* to) {
    for (;;) {
      std::optional<std::string> line = ReadUntil("\r\n", kMaxHead);
      if (!line || (to && !to->Send(*line))) return false;
      uint64_t size = 0;
      try {
        size = std::stoull(line->substr(0, line->find(';')), nullptr, 16);
      } catch (const std::exception&) {
        return false;  // not a chunk size: the stream is out of step
      }
      if (size == 0) break;
      if (!Relay(size + 2, to)) return false;  // data and its CRLF
    }
    for (;;) {  // trailers, up to the empty line
      std::optional<std::string> line = ReadUntil("\r\n", kMaxHead);
      if (!line || (to && !to->Send(*line))) return false;
      if (*line == "\r\n") return true;
    }
  }

  // Everything up to the end of the connection (a reply without a length;
  // to nullptr: read and dropped).
  bool RelayToEnd(Connection* to) {
    if (!buf_.empty() && to && !to->Send(buf_)) return false;
    buf_.clear();
    std::string chunk(kRelayChunk, '\0');
    for (;;) {
      ssize_t got = ::recv(fd_.get(), chunk.data(), chunk.size(), 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return false;
      if (got == 0) return true;
      if (to && !to->Send(std::string_view(chunk.data(), static_cast<size_t>(got)))) return false;
    }
  }

 private:
  std::optional<std::string> ReadUntil(std::string_view end, size_t max) {
    for (;;) {
      size_t at = buf_.find(end);
      if (at != std::string::npos) {
        std::string out = buf_.substr(0, at + end.size());
        buf_.erase(0, at + end.size());
        return out;
      }
      if (buf_.size() > max) return std::nullopt;
      char tmp[16 << 10];
      ssize_t got = ::recv(fd_.get(), tmp, sizeof tmp, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return std::nullopt;
      buf_.append(tmp, static_cast<size_t>(got));
    }
  }

  UniqueFd fd_;
  std::string buf_;  // received, not yet consumed
};

Result<std::unique_ptr<FaultProxy>> FaultProxy::Start(const std::string& upstream) {
  const std::string scheme = "http://";
  if (upstream.rfind(scheme, 0) != 0)
    return Status::InvalidArgument("FaultProxy: upstream '" + upstream + "' is not http://HOST:PORT");
  std::string hostport = upstream.substr(scheme.size());
  hostport = hostport.substr(0, hostport.find('/'));
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || colon + 1 == hostport.size() ||
      hostport.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    return Status::InvalidArgument("FaultProxy: upstream '" + upstream + "' has no port");
  std::string host = hostport.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const int upstream_port = std::stoi(hostport.substr(colon + 1));

  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno("FaultProxy: socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::FromErrno("FaultProxy: bind 127.0.0.1:0", errno);
  if (::listen(fd.get(), 64) != 0) return Status::FromErrno("FaultProxy: listen", errno);
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return Status::FromErrno("FaultProxy: getsockname", errno);
  return std::unique_ptr<FaultProxy>(new FaultProxy(fd.Release(), ntohs(addr.sin_port), host, upstream_port));
}

FaultProxy::FaultProxy(int listen_fd, int port, std::string upstream_host, int upstream_port)
    : listen_fd_(listen_fd), port_(port), upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Wakes every worker blocked in recv; each closes its own sockets.
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
  ::close(listen_fd_);
}

void FaultProxy::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    NoDelay(fd);
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_.push_back(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

bool FaultProxy::Track(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return false;
  open_fds_.push_back(fd);
  return true;
}

void FaultProxy::Untrack(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
}

void FaultProxy::Serve(int client_fd) {
  Connection client{UniqueFd(client_fd)};
  std::unique_ptr<Connection> upstream;
  // Before the connections close their fds: a closed fd number may be reused.
  struct Untracker {
    FaultProxy* proxy;
    const Connection& client;
    const std::unique_ptr<Connection>& upstream;
    ~Untracker() {
      proxy->Untrack(client.fd());
      if (upstream) proxy->Untrack(upstream->fd());
    }
  } untracker{this, client, upstream};

  for (;;) {
    std::optional<std::string> head_text = client.ReadHead();
    if (!head_text) return;  // the client closed the connection
    Head head = ParseHead(*head_text);
    std::optional<uint64_t> length = head.ContentLength();
    if (!head.valid || head.Chunked()) {
      (void)client.Send("HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;  // a request body the proxy cannot frame
    }
    Seen seen{head.first, head.second, length.value_or(0), 0, false, false};
    std::optional<Fault> fault = TakeFault(seen);
    const bool lose_reply = fault == Fault::kLoseReply;
    seen.injected = fault.has_value() && !lose_reply;
    seen.reply_lost = lose_reply;
    const size_t index = Record(seen);

    if (seen.injected) {
      if (!client.Relay(seen.body_bytes, nullptr)) return;
      // Logged before the client can see the answer, so a test that looks
      // at the log once its request returned finds the status there.
      SetStatus(index, FaultStatus(*fault));
      if (!client.Send(ErrorReply(*fault))) return;
      continue;
    }
    if (!upstream) {
      UniqueFd fd = Connect(upstream_host_, upstream_port_);
      if (!fd.valid() || !Track(fd.get())) {
        (void)client.Send("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
      }
      upstream = std::make_unique<Connection>(std::move(fd));
    }
    if (!upstream->Send(*head_text) || !client.Relay(seen.body_bytes, upstream.get())) return;

    bool close_after = false;
    int status = 0;
    for (;;) {  // interim 1xx replies come before the final one
      std::optional<std::string> reply_text = upstream->ReadHead();
      if (!reply_text) return;
      Head reply = ParseHead(*reply_text);
      if (!reply.valid) return;
      status = std::atoi(reply.second.c_str());
      if (status >= 200) SetStatus(index, status);  // before the client can see it (as above)
      const bool final_reply = status < 100 || status >= 200;
      // A lost reply: RGW's final answer is read whole (its work done) and
      // dropped, and the client's connection closes without it.
      Connection* to = lose_reply && final_reply ? nullptr : &client;
      if (to && !to->Send(*reply_text)) return;
      if (!final_reply) continue;
      bool ok;
      if (head.first == "HEAD" || status == 204 || status == 304) {
        ok = true;
      } else if (reply.Chunked()) {
        ok = upstream->RelayChunked(to);
      } else if (std::optional<uint64_t> n = reply.ContentLength()) {
        ok = upstream->Relay(*n, to);
      } else {
        ok = upstream->RelayToEnd(to);
        close_after = true;
      }
      if (!ok || lose_reply) return;
      std::string connection = reply.Header("connection");
      for (char& c : connection) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (connection == "close") close_after = true;
      break;
    }
    if (close_after) return;
  }
}

void FaultProxy::Arm(Match match, Fault fault, int times, int skip) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back(Rule{std::move(match), fault, skip, times});
}

std::optional<FaultProxy::Fault> FaultProxy::TakeFault(const Seen& seen) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Rule& rule : rules_) {
    if (rule.times == 0 || !rule.match(seen)) continue;
    if (rule.skip > 0) {
      --rule.skip;
      continue;
    }
    if (rule.times > 0) --rule.times;
    return rule.fault;
  }
  return std::nullopt;
}

size_t FaultProxy::Record(Seen seen) {
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back(std::move(seen));
  return log_.size() - 1;
}

void FaultProxy::SetStatus(size_t index, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  log_[index].status = status;
}

std::vector<FaultProxy::Seen> FaultProxy::Log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

std::string FaultProxy::QueryValue(const std::string& target, const std::string& name) {
  size_t q = target.find('?');
  if (q == std::string::npos) return "";
  std::string_view query(target);
  query.remove_prefix(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

FaultProxy::Match FaultProxy::UploadPart() {
  return [](const Seen& s) { return s.method == "PUT" && !QueryValue(s.target, "partNumber").empty(); };
}

FaultProxy::Match FaultProxy::UploadPartNumber(int number) {
  return [number](const Seen& s) {
    return s.method == "PUT" && QueryValue(s.target, "partNumber") == std::to_string(number);
  };
}

FaultProxy::Match FaultProxy::Complete() {
  return [](const Seen& s) { return s.method == "POST" && !QueryValue(s.target, "uploadId").empty(); };
}

FaultProxy::Match FaultProxy::Method(std::string method) {
  return [method = std::move(method)](const Seen& s) { return s.method == method; };
}

}  // namespace vramflow::testing
