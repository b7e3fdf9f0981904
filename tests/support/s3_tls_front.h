// SPDX-License-Identifier: MIT
// TlsFront: HTTPS in front of a plain-HTTP S3 (FakeS3 or the RGW fixture),
// as a private-CA endpoint looks to a client. It makes a CA and a server
// certificate for 127.0.0.1/localhost with the openssl command and runs
// `socat OPENSSL-LISTEN:PORT,fork,cert=...,key=... TCP:127.0.0.1:BACKEND`.
// Header-only (vramflow_s3_tests links no test_util.cc). The socat process
// group is killed and the files removed when it is destroyed.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/support/shell.h"

namespace vramflow::testing {

class TlsFront {
 public:
  explicit TlsFront(int backend_port) {
    char tmpl[] = "/tmp/vf-s3-tls-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::string d = ShellQuote(dir_);
    auto r = RunShell(
        "cd " + d +
        " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout ca.key "
        "-out ca.pem -subj /CN=vramflow-test-private-ca -addext basicConstraints=critical,CA:TRUE "
        "-addext keyUsage=critical,keyCertSign,cRLSign && "
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr "
        "-subj /CN=127.0.0.1 && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-out server.pem -extfile server.ext");
    if (r.code != 0) {
      error_ = "openssl: " + r.output;
      return;
    }
    port_ = FreePort();
    std::string listen = "OPENSSL-LISTEN:" + std::to_string(port_) +
                         ",bind=127.0.0.1,reuseaddr,fork,verify=0,cert=" + dir_ + "/server.pem,key=" + dir_ +
                         "/server.key";
    std::string target = "TCP:127.0.0.1:" + std::to_string(backend_port);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int null = ::open("/dev/null", O_WRONLY);  // socat logs each refused handshake
      if (null >= 0) ::dup2(null, STDERR_FILENO);
      ::execlp("socat", "socat", listen.c_str(), target.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    for (int i = 0; i < 200 && !Listening(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!Listening()) error_ = "socat did not listen on 127.0.0.1:" + std::to_string(port_);
  }
  ~TlsFront() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGTERM);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    RunShell("rm -rf " + ShellQuote(dir_));
  }
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  // Empty when it runs; else why not.
  const std::string& error() const { return error_; }
  std::string endpoint() const { return "https://127.0.0.1:" + std::to_string(port_); }
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  const std::string& dir() const { return dir_; }

 private:
  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  bool Listening() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  std::string dir_;
  std::string error_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace vramflow::testing
