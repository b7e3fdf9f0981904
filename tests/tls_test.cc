// SPDX-License-Identifier: MIT
// The TLS layer (transport/net/tls.h) against an independent peer: `openssl
// s_client` and `openssl s_server` play the other end of every handshake, so
// a mistake shared by both of our ends cannot pass. Then our two ends
// together: data both ways at once, deadlines, shutdown, SIGPIPE.
#include "transport/net/tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "tests/support/tls_test_files.h"
#include "transport/core/uri.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;
using testing::Files;
using testing::kKeyHex;
using testing::kOtherKeyHex;
using testing::RunShell;
using testing::ShellQuote;

constexpr milliseconds kTimeout{10000};

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TlsCredentials KeyCredentials(const std::string& key_file = "vf.key") {
  TlsCredentials c;
  auto key = LoadKeyFile(Files().File(key_file));
  EXPECT_TRUE(key.ok()) << key.status().ToString();
  if (key.ok()) c.key = std::move(*key);
  return c;
}

TlsCredentials CertCredentials(const std::string& name, const std::string& ca = "ca") {
  TlsCredentials c;
  c.cert_file = Files().File(name + ".pem");
  c.key_file = Files().File(name + ".key");
  c.ca_file = Files().File(ca + ".pem");
  return c;
}

std::unique_ptr<TlsContext> Context(const TlsCredentials& credentials, TlsContext::Role role) {
  auto context = TlsContext::Create(credentials, role);
  EXPECT_TRUE(context.ok()) << context.status().ToString();
  return context.ok() ? std::move(*context) : nullptr;
}

// One connection served by our end: the handshake, then "ping" -> "pong".
struct Served {
  Status status;
  std::string identity;
  std::string client_output;  // what the openssl client printed
};

// Runs `client` (a shell line; {PORT} is replaced) while our server takes
// one connection on 127.0.0.1.
Served ServeOnce(const TlsCredentials& credentials, std::string client) {
  Served out;
  auto context = Context(credentials, TlsContext::Role::kServer);
  if (!context) return out;
  auto listener = Listener::Open(*ParseEndpoint("tcp://127.0.0.1:0"), SocketOptions{});
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  if (!listener.ok()) return out;
  std::string port = listener->uri().substr(listener->uri().rfind(':') + 1);
  client.replace(client.find("{PORT}"), 6, port);
  auto run = std::async(std::launch::async, [client] { return RunShell(client); });
  std::string peer;
  auto fd = listener->Accept(kTimeout, &peer);
  if (!fd.ok()) {
    out.status = fd.status();
  } else {
    auto conn = TlsConnection::Handshake(*context, std::move(*fd), "", kTimeout, peer);
    if (!conn.ok()) {
      out.status = conn.status();
    } else {
      out.identity = (*conn)->peer_identity();
      std::string ping(4, '\0');
      out.status = (*conn)->RecvAll({reinterpret_cast<uint8_t*>(ping.data()), 4}, kTimeout, "ping");
      if (out.status.ok() && ping != "ping") out.status = Status::Corruption("got '" + ping + "'");
      if (out.status.ok()) out.status = (*conn)->SendAll(Bytes("pong\n"), kTimeout, "pong");
    }
  }
  out.client_output = run.get().output;
  return out;
}

std::string SClient(const std::string& args) {
  return "printf ping | timeout 20 openssl s_client -connect 127.0.0.1:{PORT} -ign_eof " + args;
}

std::string PskArgs(const std::string& hex = kKeyHex, const std::string& identity = kTlsPskIdentity) {
  return "-psk " + hex + " -psk_identity " + identity;
}

std::string CertArgs(const std::string& name, const std::string& ca = "ca") {
  return "-cert " + Files().File(name + ".pem") + " -key " + Files().File(name + ".key") + " -CAfile " +
         Files().File(ca + ".pem");
}

// `openssl s_server -rev` (answers each line reversed) on a free port, for
// one connection; killed when destroyed.
class SServer {
 public:
  explicit SServer(const std::string& args) : log_(Files().path() + "/s_server." + std::to_string(++count_) + ".log") {
    std::string line = "exec openssl s_server -accept 127.0.0.1:0 -naccept 1 -rev " + args;
    pid_ = ::fork();
    if (pid_ == 0) {
      int in = ::open("/dev/null", O_RDONLY);
      int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) ::_exit(126);
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // It prints "ACCEPT 127.0.0.1:PORT" once it listens.
    for (int i = 0; i < 500 && port_.empty(); ++i) {
      std::string text = ReadText(log_);
      size_t at = text.find("ACCEPT 127.0.0.1:");
      size_t end = at == std::string::npos ? at : text.find('\n', at);
      if (end != std::string::npos) port_ = text.substr(at + 17, end - at - 17);
      else std::this_thread::sleep_for(milliseconds(20));
    }
    EXPECT_FALSE(port_.empty()) << "s_server did not start: " << ReadText(log_);
  }
  ~SServer() {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  std::string Log() const { return ReadText(log_); }
  const std::string& port() const { return port_; }

  // Our client: connects, shakes hands, sends "hello\n", expects "olleh\n".
  Result<std::string> Exchange(const TlsCredentials& credentials, const std::string& host = "127.0.0.1") {
    auto context = Context(credentials, TlsContext::Role::kClient);
    if (!context) return Status::Internal("no context");
    VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint("tcp://127.0.0.1:" + port_));
    VF_ASSIGN_OR_RETURN(UniqueFd fd, ConnectStream(endpoint, SocketOptions{}));
    VF_ASSIGN_OR_RETURN(auto conn, TlsConnection::Handshake(*context, std::move(fd), host, kTimeout, "s_server"));
    VF_RETURN_IF_ERROR(conn->SendAll(Bytes("hello\n"), kTimeout, "hello"));
    std::string reply(6, '\0');
    VF_RETURN_IF_ERROR(conn->RecvAll({reinterpret_cast<uint8_t*>(reply.data()), 6}, kTimeout, "reply"));
    if (reply != "olleh\n") return Status::Corruption("s_server answered '" + reply + "'");
    return conn->peer_identity();
  }

 private:
  static inline int count_ = 0;
  std::string log_;
  pid_t pid_ = -1;
  std::string port_;
};

// --- shared key (TLS 1.3 external PSK with (EC)DHE) ---

TEST(TlsTest, PskHandshakeWithOpensslClient) {
  Served s = ServeOnce(KeyCredentials(), SClient(PskArgs()));
  ASSERT_TRUE(s.status.ok()) << s.status.ToString() << "\n" << s.client_output;
  EXPECT_EQ(s.identity, "PSK identity 'vramflow'");
  EXPECT_NE(s.client_output.find("pong"), std::string::npos) << s.client_output;
  EXPECT_NE(s.client_output.find("TLSv1.3"), std::string::npos) << s.client_output;
  // (EC)DHE ran: the server sent a key share.
  EXPECT_NE(s.client_output.find("Server Temp Key: X25519"), std::string::npos) << s.client_output;
}

TEST(TlsTest, PskHandshakeWithOpensslServerOffersOnlyDhe) {
  SServer server("-nocert -trace " + PskArgs());
  auto identity = server.Exchange(KeyCredentials());
  ASSERT_TRUE(identity.ok()) << identity.status().ToString() << "\n" << server.Log();
  EXPECT_EQ(*identity, "PSK identity 'vramflow'");
  // Our ClientHello's psk_key_exchange_modes names psk_dhe_ke and nothing else.
  std::string log = server.Log();
  size_t modes = log.find("extension_type=psk_key_exchange_modes");
  ASSERT_NE(modes, std::string::npos) << log;
  std::string ext = log.substr(modes, log.find("extension_type=", modes + 10) - modes);
  EXPECT_NE(ext.find("psk_dhe_ke"), std::string::npos) << ext;
  EXPECT_EQ(ext.find("psk_ke "), std::string::npos) << ext;
}

TEST(TlsTest, PskWithoutDheIsRefusedByOurServer) {
  // Control: this client's offer (PSK, psk_ke allowed, only ffdhe2048 to
  // share) succeeds without any key exchange against a server that allows it.
  {
    SServer permissive("-nocert -allow_no_dhe_kex -groups X25519 " + PskArgs());
    auto r = RunShell("printf 'hi\\nCLOSE\\n' | timeout 20 openssl s_client -connect 127.0.0.1:" + permissive.port() +
                      " -ign_eof -allow_no_dhe_kex -groups ffdhe2048 " + PskArgs());
    ASSERT_NE(r.output.find("ih"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("Server Temp Key"), std::string::npos) << r.output;
  }
  Served s = ServeOnce(KeyCredentials(), SClient("-allow_no_dhe_kex -groups ffdhe2048 " + PskArgs()));
  EXPECT_FALSE(s.status.ok());
  EXPECT_EQ(s.status.code(), Status::Code::kUnauthenticated) << s.status.ToString();
  EXPECT_EQ(s.client_output.find("pong"), std::string::npos) << s.client_output;
}

TEST(TlsTest, PskWithoutDheIsRefusedByOurClient) {
  // This server would settle for the PSK alone when no group is shared.
  SServer server("-nocert -allow_no_dhe_kex -groups ffdhe2048 " + PskArgs());
  auto identity = server.Exchange(KeyCredentials());
  ASSERT_FALSE(identity.ok());
  EXPECT_EQ(identity.status().code(), Status::Code::kUnauthenticated) << identity.status().ToString();
}

TEST(TlsTest, Tls12IsRefused) {
  Served s = ServeOnce(KeyCredentials(), SClient("-tls1_2 " + PskArgs()));
  ASSERT_FALSE(s.status.ok());
  EXPECT_NE(s.status.message().find("TLS handshake with 127.0.0.1:"), std::string::npos) << s.status.ToString();
  EXPECT_NE(s.status.message().find("unsupported protocol"), std::string::npos) << s.status.ToString();

  SServer server("-nocert -tls1_2 " + PskArgs());
  auto identity = server.Exchange(KeyCredentials());
  EXPECT_FALSE(identity.ok());
}

TEST(TlsTest, WrongPskIdentityIsRefused) {
  Served s = ServeOnce(KeyCredentials(), SClient(PskArgs(kKeyHex, "intruder")));
  ASSERT_FALSE(s.status.ok());
  EXPECT_NE(s.status.message().find("PSK identity 'intruder', not 'vramflow'"), std::string::npos)
      << s.status.ToString();

  SServer server("-nocert " + PskArgs(kKeyHex, "someone-else"));
  EXPECT_FALSE(server.Exchange(KeyCredentials()).ok());
}

TEST(TlsTest, WrongKeyIsRefusedBothWays) {
  Served s = ServeOnce(KeyCredentials(), SClient(PskArgs(kOtherKeyHex)));
  ASSERT_FALSE(s.status.ok());
  EXPECT_EQ(s.status.code(), Status::Code::kUnauthenticated) << s.status.ToString();
  EXPECT_EQ(s.client_output.find("pong"), std::string::npos);

  SServer server("-nocert " + PskArgs(kOtherKeyHex));
  auto identity = server.Exchange(KeyCredentials());
  ASSERT_FALSE(identity.ok());
  EXPECT_EQ(identity.status().code(), Status::Code::kUnauthenticated) << identity.status().ToString();
}

TEST(TlsTest, ClientWithoutPskIsToldItOfferedNone) {
  Served s = ServeOnce(KeyCredentials(), SClient("-CAfile " + Files().File("ca.pem")));
  ASSERT_FALSE(s.status.ok());
  EXPECT_NE(s.status.message().find("offered no pre-shared key"), std::string::npos) << s.status.ToString();
}

// --- certificates (mutual TLS) ---

TEST(TlsTest, MutualTlsWithOpensslClient) {
  Served s = ServeOnce(CertCredentials("server"), SClient(CertArgs("client") + " -verify_return_error"));
  ASSERT_TRUE(s.status.ok()) << s.status.ToString() << "\n" << s.client_output;
  EXPECT_EQ(s.identity, "certificate 'O=vramflow-test,CN=sender'");
  EXPECT_NE(s.client_output.find("pong"), std::string::npos) << s.client_output;
}

TEST(TlsTest, MutualTlsWithOpensslServer) {
  SServer server(CertArgs("server") + " -Verify 1 -verify_return_error");
  auto identity = server.Exchange(CertCredentials("client"));
  ASSERT_TRUE(identity.ok()) << identity.status().ToString() << "\n" << server.Log();
  EXPECT_EQ(*identity, "certificate 'O=vramflow-test,CN=receiver'");
}

TEST(TlsTest, ClientWithoutCertificateIsRefused) {
  Served s = ServeOnce(CertCredentials("server"), SClient("-CAfile " + Files().File("ca.pem")));
  ASSERT_FALSE(s.status.ok());
  EXPECT_NE(s.status.message().find("certificate"), std::string::npos) << s.status.ToString();
}

TEST(TlsTest, CertificateOfAnotherCaIsRefusedBothWays) {
  Served s = ServeOnce(CertCredentials("server"), SClient(CertArgs("other-client", "ca")));
  ASSERT_FALSE(s.status.ok());
  EXPECT_NE(s.status.message().find("unable to get local issuer certificate"), std::string::npos)
      << s.status.ToString();

  SServer server(CertArgs("other-server", "ca") + " -Verify 1");
  auto identity = server.Exchange(CertCredentials("client"));
  ASSERT_FALSE(identity.ok());
  EXPECT_NE(identity.status().message().find("unable to get local issuer certificate"), std::string::npos)
      << identity.status().ToString();
}

TEST(TlsTest, ServerCertificateMustNameTheHost) {
  SServer server(CertArgs("server") + " -Verify 1");
  auto identity = server.Exchange(CertCredentials("client"), "10.9.8.7");
  ASSERT_FALSE(identity.ok());
  EXPECT_NE(identity.status().message().find("mismatch"), std::string::npos) << identity.status().ToString();
}

// --- our two ends ---

struct Pair {
  std::unique_ptr<TlsConnection> client;
  std::unique_ptr<TlsConnection> server;
};

Result<Pair> Connect(const TlsCredentials& client_creds, const TlsCredentials& server_creds,
                     milliseconds timeout = kTimeout) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::FromErrno("socketpair", errno);
  UniqueFd a(sv[0]), b(sv[1]);
  auto client_ctx = Context(client_creds, TlsContext::Role::kClient);
  auto server_ctx = Context(server_creds, TlsContext::Role::kServer);
  if (!client_ctx || !server_ctx) return Status::Internal("no context");
  auto server = std::async(std::launch::async,
                           [&] { return TlsConnection::Handshake(*server_ctx, std::move(b), "", timeout, "client"); });
  auto client = TlsConnection::Handshake(*client_ctx, std::move(a), "127.0.0.1", timeout, "server");
  auto served = server.get();
  VF_RETURN_IF_ERROR(client.status());
  VF_RETURN_IF_ERROR(served.status());
  return Pair{std::move(*client), std::move(*served)};
}

// 16 MiB each way at the same time, one reader and one writer per end.
void ExchangeBothWays(Pair& p) {
  std::vector<uint8_t> up = testing::TextBytes(16 << 20);
  std::vector<uint8_t> down(up.rbegin(), up.rend());
  std::vector<uint8_t> got_up(up.size()), got_down(down.size());
  auto w1 = std::async(std::launch::async, [&] { return p.client->SendAll(up, kTimeout, "up"); });
  auto w2 = std::async(std::launch::async, [&] { return p.server->SendAll(down, kTimeout, "down"); });
  auto r1 = std::async(std::launch::async, [&] { return p.server->RecvAll(got_up, kTimeout, "up"); });
  auto r2 = std::async(std::launch::async, [&] { return p.client->RecvAll(got_down, kTimeout, "down"); });
  EXPECT_TRUE(w1.get().ok());
  EXPECT_TRUE(w2.get().ok());
  EXPECT_TRUE(r1.get().ok());
  EXPECT_TRUE(r2.get().ok());
  EXPECT_TRUE(got_up == up);
  EXPECT_TRUE(got_down == down);
}

TEST(TlsTest, OurEndsExchangeBothWaysAtOnce) {
  auto psk = Connect(KeyCredentials(), KeyCredentials());
  ASSERT_TRUE(psk.ok()) << psk.status().ToString();
  EXPECT_EQ(psk->client->cipher(), "TLS_AES_128_GCM_SHA256");
  ExchangeBothWays(*psk);

  auto mtls = Connect(CertCredentials("client"), CertCredentials("server"));
  ASSERT_TRUE(mtls.ok()) << mtls.status().ToString();
  EXPECT_EQ(mtls->client->cipher(), "TLS_AES_256_GCM_SHA384");
  ExchangeBothWays(*mtls);
}

TEST(TlsTest, KtlsIsOptInAndFallsBackWhereTheKernelHasNone) {
  TlsCredentials c = KeyCredentials();
  c.ktls = true;
  auto p = Connect(c, c);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // Whatever the kernel offers (this one: no CONFIG_TLS), data flows.
  ExchangeBothWays(*p);
  TlsCredentials off = KeyCredentials();
  auto q = Connect(off, off);
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->client->ktls_send());
  EXPECT_FALSE(q->server->ktls_recv());
}

TEST(TlsTest, ClosedPeerIsTruncationAndNoSigpipe) {
  auto p = Connect(KeyCredentials(), KeyCredentials());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  p->server.reset();  // close_notify, then the socket closes
  std::vector<uint8_t> buf(10);
  Status r = p->client->RecvAll(buf, kTimeout, "reading");
  EXPECT_EQ(r.code(), Status::Code::kTruncated) << r.ToString();
  EXPECT_NE(r.message().find("after 0 of 10 bytes"), std::string::npos) << r.ToString();
  // Writing to the closed socket: EPIPE as an error, not a SIGPIPE (which
  // would kill this test binary).
  std::vector<uint8_t> big(8 << 20);
  Status w = p->client->SendAll(big, kTimeout, "writing");
  EXPECT_FALSE(w.ok());
  EXPECT_FALSE(p->client->SendAll(big, kTimeout, "writing again").ok());
}

TEST(TlsTest, ShutdownWakesABlockedReader) {
  auto p = Connect(KeyCredentials(), KeyCredentials());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<uint8_t> buf(10);
  auto start = std::chrono::steady_clock::now();
  auto reader = std::async(std::launch::async, [&] { return p->client->RecvAll(buf, kTimeout, "reading"); });
  std::this_thread::sleep_for(milliseconds(100));
  p->client->Shutdown();
  Status r = reader.get();
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(TlsTest, SilentPeerTimesOutTheHandshake) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd silent(sv[1]);
  auto context = Context(KeyCredentials(), TlsContext::Role::kServer);
  auto start = std::chrono::steady_clock::now();
  auto conn = TlsConnection::Handshake(*context, UniqueFd(sv[0]), "", milliseconds(300), "10.0.0.9:4444");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Status::Code::kTimedOut) << conn.status().ToString();
  EXPECT_NE(conn.status().message().find("TLS handshake with 10.0.0.9:4444"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(TlsTest, PlaintextPeerIsRefused) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd plain(sv[1]);
  std::string hello = "VFLOWNET" + std::string(88, '\0');  // an old vramflow sender's hello
  ASSERT_TRUE(SendAll(plain.get(), Bytes(hello), kTimeout, "hello").ok());
  auto context = Context(KeyCredentials(), TlsContext::Role::kServer);
  auto conn = TlsConnection::Handshake(*context, UniqueFd(sv[0]), "", kTimeout, "old-sender");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Status::Code::kUnauthenticated) << conn.status().ToString();
}

TEST(TlsTest, MismatchedModesAreRefused) {
  auto p = Connect(KeyCredentials(), CertCredentials("server"));
  EXPECT_FALSE(p.ok());
  auto q = Connect(CertCredentials("client"), KeyCredentials());
  EXPECT_FALSE(q.ok());
}

// --- credentials ---

TEST(TlsTest, CredentialsMustBeOneCompleteKind) {
  using Role = TlsContext::Role;
  EXPECT_EQ(TlsContext::Create({}, Role::kServer).status().code(), Status::Code::kInvalidArgument);
  TlsCredentials both = CertCredentials("server");
  both.key = KeyCredentials().key;
  auto r = TlsContext::Create(both, Role::kServer);
  EXPECT_NE(r.status().message().find("both a shared key"), std::string::npos) << r.status().ToString();
  TlsCredentials no_ca = CertCredentials("server");
  no_ca.ca_file.clear();
  r = TlsContext::Create(no_ca, Role::kClient);
  EXPECT_NE(r.status().message().find("missing --ca"), std::string::npos) << r.status().ToString();
  TlsCredentials wrong_key = CertCredentials("server");
  wrong_key.key_file = Files().File("client.key");
  r = TlsContext::Create(wrong_key, Role::kServer);
  EXPECT_NE(r.status().message().find("key values mismatch"), std::string::npos) << r.status().ToString();
  TlsCredentials missing = CertCredentials("server");
  missing.cert_file = Files().File("nope.pem");
  r = TlsContext::Create(missing, Role::kServer);
  EXPECT_NE(r.status().message().find("nope.pem"), std::string::npos) << r.status().ToString();
}

TEST(TlsTest, PskFromKey) {
  SharedKey hex{std::vector<uint8_t>(kKeyHex, kKeyHex + 64), "k"};
  auto psk = TlsPskFromKey(hex);
  ASSERT_TRUE(psk.ok());
  ASSERT_EQ(psk->size(), 32u);
  EXPECT_EQ((*psk)[0], 0x00);
  EXPECT_EQ((*psk)[1], 0x11);
  EXPECT_EQ((*psk)[31], 0xff);
  SharedKey text{
      std::vector<uint8_t>{'a', ' ', 'p', 'a', 's', 's', 'p', 'h', 'r', 'a', 's', 'e', ' ', 'o', 'f', ' ', 'x'}, "t"};
  psk = TlsPskFromKey(text);
  ASSERT_TRUE(psk.ok());
  EXPECT_EQ(*psk, text.secret);
  SharedKey short_hex{std::vector<uint8_t>(kKeyHex, kKeyHex + 20), "short"};
  auto r = TlsPskFromKey(short_hex);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("10 bytes (written in hex, 20 digits)"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace vramflow
