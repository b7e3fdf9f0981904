// SPDX-License-Identifier: MIT
#include "transport/core/uri.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace vramflow {
namespace {

using Kind = Endpoint::Kind;

Endpoint MustParse(const std::string& uri) {
  auto r = ParseEndpoint(uri);
  EXPECT_TRUE(r.ok()) << uri << ": " << r.status().ToString();
  return r.ok() ? r.value() : Endpoint{};
}

TEST(UriTest, PathsStdioAndFds) {
  Endpoint e = MustParse("/tmp/dump.vf");
  EXPECT_EQ(e.kind, Kind::kPath);
  EXPECT_EQ(e.path, "/tmp/dump.vf");
  EXPECT_EQ(e.uri, "/tmp/dump.vf");
  EXPECT_FALSE(e.is_network());

  e = MustParse("relative/dir/file");
  EXPECT_EQ(e.kind, Kind::kPath);
  EXPECT_EQ(e.path, "relative/dir/file");

  // Colons elsewhere, and things that only look like schemes, are file names.
  for (const char* path : {"C:/data", "a:b", "./tcp:host:1", "dump.vf?streams=2", "unixfile", "fdx"}) {
    e = MustParse(path);
    EXPECT_EQ(e.kind, Kind::kPath) << path;
    EXPECT_EQ(e.path, path);
  }

  e = MustParse("-");
  EXPECT_EQ(e.kind, Kind::kStdio);
  EXPECT_EQ(e.uri, "-");

  e = MustParse("fd:0");
  EXPECT_EQ(e.kind, Kind::kFd);
  EXPECT_EQ(e.fd, 0);
  e = MustParse("fd:17");
  EXPECT_EQ(e.kind, Kind::kFd);
  EXPECT_EQ(e.fd, 17);
  EXPECT_EQ(e.uri, "fd:17");
  e = MustParse("fd:2147483647");
  EXPECT_EQ(e.fd, 2147483647);
}

TEST(UriTest, BadFdsAndEmpty) {
  for (const char* uri : {"fd:", "fd:-1", "fd:3x", "fd:+3", "fd: 3", "fd:0x10", "fd:2147483648", "fd:99999999999"}) {
    auto r = ParseEndpoint(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << uri;
    EXPECT_NE(r.status().message().find(std::string("'") + uri + "'"), std::string::npos) << r.status().message();
  }
  auto r = ParseEndpoint("");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
}

// systemd: names the socket systemd passes; it takes nothing after the colon.
TEST(UriTest, SystemdSocket) {
  auto endpoint = ParseEndpoint("systemd:");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  EXPECT_EQ(endpoint->kind, Endpoint::Kind::kSystemd);
  EXPECT_TRUE(endpoint->is_network());
  for (const char* bad : {"systemd:x", "systemd://", "systemd:?streams=2"}) {
    auto refused = ParseEndpoint(bad);
    EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("write systemd: alone"), std::string::npos)
        << refused.status().ToString();
  }
}

TEST(UriTest, UnixSockets) {
  Endpoint e = MustParse("unix:/run/vramflow.sock");
  EXPECT_EQ(e.kind, Kind::kUnix);
  EXPECT_EQ(e.path, "/run/vramflow.sock");
  EXPECT_EQ(e.streams, 0u);
  EXPECT_TRUE(e.is_network());

  e = MustParse("unix:rel/sock");
  EXPECT_EQ(e.kind, Kind::kUnix);
  EXPECT_EQ(e.path, "rel/sock");

  e = MustParse("unix:/tmp/s?streams=8");
  EXPECT_EQ(e.kind, Kind::kUnix);
  EXPECT_EQ(e.path, "/tmp/s");
  EXPECT_EQ(e.streams, 8u);
  EXPECT_EQ(e.uri, "unix:/tmp/s?streams=8");

  for (const char* uri : {"unix:", "unix:?streams=2", "unix://tmp/s", "unix:/s?streams=0", "unix:/s?streams=65",
                          "unix:/s?bogus=1", "unix:/s?streams=", "unix:/s?streams", "unix:/s?"}) {
    auto r = ParseEndpoint(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << uri;
    EXPECT_NE(r.status().message().find(uri), std::string::npos) << r.status().message();
  }
}

TEST(UriTest, TcpHostsAndPorts) {
  Endpoint e = MustParse("tcp://example.com:7000");
  EXPECT_EQ(e.kind, Kind::kTcp);
  EXPECT_EQ(e.host, "example.com");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.streams, 0u);
  EXPECT_TRUE(e.is_network());

  e = MustParse("tcp://10.1.2.3:1");
  EXPECT_EQ(e.host, "10.1.2.3");
  EXPECT_EQ(e.port, 1);

  e = MustParse("tcp://[::1]:65535");
  EXPECT_EQ(e.kind, Kind::kTcp);
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 65535);

  e = MustParse("tcp://[fe80::1%eth0]:80");
  EXPECT_EQ(e.host, "fe80::1%eth0");

  e = MustParse("tcp://[2001:db8::7]:0");
  EXPECT_EQ(e.host, "2001:db8::7");
  EXPECT_EQ(e.port, 0);

  // Port 0: any free port; empty host: all addresses (both for listening).
  e = MustParse("tcp://localhost:0");
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(e.port, 0);
  e = MustParse("tcp://:9000");
  EXPECT_EQ(e.kind, Kind::kTcp);
  EXPECT_EQ(e.host, "");
  EXPECT_EQ(e.port, 9000);

  e = MustParse("tcp://host-1.lan:5000?streams=64");
  EXPECT_EQ(e.host, "host-1.lan");
  EXPECT_EQ(e.port, 5000);
  EXPECT_EQ(e.streams, 64u);
  EXPECT_EQ(e.uri, "tcp://host-1.lan:5000?streams=64");

  e = MustParse("tcp://[::]:5000?streams=1");
  EXPECT_EQ(e.host, "::");
  EXPECT_EQ(e.streams, 1u);
}

TEST(UriTest, BadTcp) {
  const std::vector<std::string> bad = {"tcp://",
                                        "tcp://host",
                                        "tcp://host:",
                                        "tcp://host:65536",
                                        "tcp://host:-1",
                                        "tcp://host:80x",
                                        "tcp://host:99999999999",
                                        "tcp://::1:80",
                                        "tcp://[::1]",
                                        "tcp://[::1]80",
                                        "tcp://[::1:80",
                                        "tcp://[]:80",
                                        "tcp://[host]:80",
                                        "tcp://host:80/path",
                                        "tcp://ho st:80",
                                        "tcp://host:80?streams=0",
                                        "tcp://host:80?streams=65",
                                        "tcp://host:80?streams=two",
                                        "tcp://host:80?level=3",
                                        "tcp://host:80?streams=2&streams=3",
                                        "tcp://host:80?streams=2&",
                                        "tcp:host:80"};
  for (const std::string& uri : bad) {
    auto r = ParseEndpoint(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << uri << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("'" + uri + "'"), std::string::npos) << r.status().message();
  }
  auto r = ParseEndpoint("tcp://host:80?level=3");
  EXPECT_NE(r.status().message().find("level"), std::string::npos) << r.status().message();
}

// A network address written without tcp:// is refused, naming the URI it
// probably meant and how to write a file of that name.
TEST(UriTest, HostPortWithoutSchemeIsRefusedWithAHint) {
  const std::vector<std::pair<std::string, std::string>> meant = {
      {"127.0.0.1:7999", "tcp://127.0.0.1:7999"},
      {"hostB:7070", "tcp://hostB:7070"},
      {"node-3.example.com:1", "tcp://node-3.example.com:1"},
      {"10.0.0.2:7070/ckpt.vfs", "tcp://10.0.0.2:7070"},
      {"[::1]:7999", "tcp://[::1]:7999"},
      {"[fe80::1%eth0]:80", "tcp://[fe80::1%eth0]:80"},
      {":7070", "tcp://:7070"},
      {"localhost:0", "tcp://localhost:0"}};
  for (const auto& [uri, hint] : meant) {
    auto r = ParseEndpoint(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << uri;
    EXPECT_NE(r.status().message().find("did you mean " + hint + "?"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("./" + uri), std::string::npos) << r.status().message();
    // The file of that name, written as the hint says.
    Endpoint e = MustParse("./" + uri);
    EXPECT_EQ(e.kind, Kind::kPath);
    EXPECT_EQ(e.path, "./" + uri);
  }
  // Colons that do not make an address stay in paths.
  for (const char* path : {"/data/10.0.0.2:7070", "dir/host:80", "a:b", "host:80x", "host:65536", "[::1]", "[x]:80",
                           "ho st:80", "C:/data", "2024-01-01T10:00:00.vfs"}) {
    Endpoint e = MustParse(path);
    EXPECT_EQ(e.kind, Kind::kPath) << path;
  }
}

TEST(UriTest, UnsupportedSchemes) {
  for (const std::string& uri :
       std::vector<std::string>{"gs://b/k", "http://host/x", "https://h:443/", "TCPX://h:1", "file:///tmp/x"}) {
    auto r = ParseEndpoint(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), Status::Code::kNotSupported) << uri;
    std::string scheme = uri.substr(0, uri.find("://"));
    EXPECT_NE(r.status().message().find("'" + scheme + "'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("'" + uri + "'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("tcp://HOST:PORT"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(ParseEndpoint("gs://b/k").status().message(),
            "unsupported URI scheme 'gs' in 'gs://b/k' (supported: PATH, -, fd:N, unix:PATH, tcp://HOST:PORT, "
            "s3://BUCKET/KEY)");
}

}  // namespace
}  // namespace vramflow
