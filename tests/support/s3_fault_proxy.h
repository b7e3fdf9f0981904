// SPDX-License-Identifier: MIT
// FaultProxy: an HTTP/1.1 reverse proxy in front of a real S3 endpoint (the
// Ceph RGW of the S3Rgw tests) that answers chosen requests with an S3 error
// instead of forwarding them, or forwards them and loses the reply, and logs
// every request it sees.
//
// Why a proxy and not the fake server: the fake S3 shows what the client
// does with an error, the proxy shows that the retries, the abort and the
// growing parts work against a real store (RGW keeps its own state of the
// multipart upload, checks signatures, Content-MD5 and part sizes).
//
// Requests and replies pass through byte for byte. A client pointed at the
// proxy (S3Options::endpoint = endpoint()) signs Host: 127.0.0.1:PROXYPORT,
// RGW checks the signature against the Host it receives, the same bytes, and
// takes the bucket from the path (path-style): signatures stay valid.
//
// One thread per client connection, each with its own upstream connection
// (opened when the first request is forwarded). Request bodies are framed by
// Content-Length (libcurl sends nothing else for our requests); replies by
// Content-Length, chunked encoding (RGW's listings) or the end of the
// connection. Injected errors carry an S3 XML body and keep the connection
// open, as S3 does. Thread-safe; destroying it closes every connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace vramflow::testing {

class FaultProxy {
 public:
  enum class Fault {
    kInternalError500,  // 500 InternalError
    kSlowDown503,       // 503 SlowDown
    kLoseReply,         // forwarded, and RGW's reply read whole, but the client's connection closed instead
  };

  // One request, as the proxy saw it.
  struct Seen {
    std::string method;
    std::string target;       // "/bucket/key?partNumber=2&uploadId=..."
    uint64_t body_bytes = 0;  // Content-Length of the request
    int status = 0;           // the status answered (0: no answer, the connection broke)
    bool injected = false;    // answered by the proxy, not forwarded
    bool reply_lost = false;  // forwarded and answered (status), the reply not passed on
  };
  using Match = std::function<bool(const Seen&)>;  // sees method, target and body_bytes

  // Listens on 127.0.0.1 (a free port) and forwards to `upstream`
  // ("http://HOST:PORT", plain HTTP only).
  static Result<std::unique_ptr<FaultProxy>> Start(const std::string& upstream);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // "http://127.0.0.1:PORT".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The requests `match` accepts get `fault`: after letting `skip` of them
  // through, the next `times` ones (times < 0: every one from then on).
  // Rules are tried in the order they were armed; the first with faults
  // left that matches answers.
  void Arm(Match match, Fault fault, int times, int skip = 0);
  // Every request so far, in the order they arrived.
  std::vector<Seen> Log() const;

  // Matchers. UploadPart: a PUT with partNumber= in the query.
  static Match UploadPart();
  static Match UploadPartNumber(int number);
  static Match Method(std::string method);
  // CompleteMultipartUpload: a POST with uploadId= in the query.
  static Match Complete();
  // The value of `name` in the target's query ("" when absent or empty).
  static std::string QueryValue(const std::string& target, const std::string& name);

 private:
  struct Rule {
    Match match;
    Fault fault;
    int skip;
    int times;
  };
  class Connection;

  FaultProxy(int listen_fd, int port, std::string upstream_host, int upstream_port);
  void AcceptLoop();
  void Serve(int client_fd);
  std::optional<Fault> TakeFault(const Seen& seen);
  size_t Record(Seen seen);
  void SetStatus(size_t index, int status);
  // Adds `fd` to the sockets shut down on destruction; false when stopping.
  bool Track(int fd);
  void Untrack(int fd);

  int listen_fd_;
  int port_;
  std::string upstream_host_;
  int upstream_port_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::vector<Rule> rules_;           // GUARDED_BY(mu_)
  std::vector<Seen> log_;             // GUARDED_BY(mu_)
  std::vector<int> open_fds_;         // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;  // GUARDED_BY(mu_)
};

}  // namespace vramflow::testing
