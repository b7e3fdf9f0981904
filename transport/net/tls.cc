// SPDX-License-Identifier: MIT
#include "transport/net/tls.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include "common/hex.h"
#include "common/printable.h"
#include "transport/net/deadline.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;

// Shared-key mode: the PSK is bound to SHA-256, so only SHA-256 suites (what
// `openssl s_client -psk` uses). Certificate mode: every TLS 1.3 suite.
constexpr char kPskSuites[] = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
constexpr char kCertSuites[] = "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
// The (EC)DHE groups offered and accepted.
constexpr char kGroups[] = "X25519:P-256:P-384";
// TLS_AES_128_GCM_SHA256, the suite the PSK is declared for.
constexpr unsigned char kPskSuiteId[] = {0x13, 0x01};
// SSL_SESSION_set1_master_key holds at most this much in OpenSSL 3.
constexpr size_t kMaxPskBytes = 256;

// OpenSSL's reasons on this thread's error queue, oldest first, which it clears.
std::string TakeErrors() {
  std::string out;
  while (unsigned long err = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(err);
    std::string text = reason ? reason : "error " + std::to_string(ERR_GET_REASON(err));
    if (out.find(text) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + text;
  }
  return out.empty() ? "no reason given" : out;
}

// OpenSSL writes to sockets with write(), which raises SIGPIPE when the peer
// has gone. The plugin runs inside CRIU, so a library may not ignore the
// signal process-wide: block it on this thread for the call, and take back
// a SIGPIPE that the call raised.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

// What the PSK callback saw during one handshake, for a precise message
// when the handshake fails.
struct HandshakeNotes {
  std::optional<std::string> offered_identity;
};

const std::vector<uint8_t>& PskOf(SSL* ssl) {
  return *static_cast<const std::vector<uint8_t>*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
}

// A session standing for the external PSK: TLS 1.3, TLS_AES_128_GCM_SHA256.
SSL_SESSION* PskSession(SSL* ssl) {
  const std::vector<uint8_t>& psk = PskOf(ssl);
  const SSL_CIPHER* suite = SSL_CIPHER_find(ssl, kPskSuiteId);
  if (suite == nullptr) return nullptr;
  SSL_SESSION* session = SSL_SESSION_new();
  if (session == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(session, psk.data(), psk.size()) != 1 ||
      SSL_SESSION_set_cipher(session, suite) != 1 || SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

bool IsOurIdentity(const unsigned char* identity, size_t len) {
  return len == std::strlen(kTlsPskIdentity) && std::memcmp(identity, kTlsPskIdentity, len) == 0;
}

// Server: the client offers a PSK under `identity`. Another identity gets
// no session, and without a certificate the handshake then fails.
int FindPsk(SSL* ssl, const unsigned char* identity, size_t identity_len, SSL_SESSION** session) {
  *session = nullptr;
  if (auto* notes = static_cast<HandshakeNotes*>(SSL_get_app_data(ssl)))
    notes->offered_identity = Printable(std::string(reinterpret_cast<const char*>(identity), identity_len));
  if (!IsOurIdentity(identity, identity_len)) return 1;
  *session = PskSession(ssl);
  return *session != nullptr ? 1 : 0;
}

// Client: offer the PSK. `md` is set after a HelloRetryRequest: the PSK only
// fits a SHA-256 suite.
int UsePsk(SSL* ssl, const EVP_MD* md, const unsigned char** identity, size_t* identity_len, SSL_SESSION** session) {
  *session = nullptr;
  SSL_SESSION* psk = PskSession(ssl);
  if (psk == nullptr) return 0;
  const EVP_MD* psk_md = SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(psk));
  if (md != nullptr && (psk_md == nullptr || EVP_MD_get_type(md) != EVP_MD_get_type(psk_md))) {
    SSL_SESSION_free(psk);
    return 1;
  }
  *session = psk;
  *identity = reinterpret_cast<const unsigned char*>(kTlsPskIdentity);
  *identity_len = std::strlen(kTlsPskIdentity);
  return 1;
}

std::string CertificateSubject(X509* cert) {
  if (cert == nullptr) return "no certificate";
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "?";
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string subject(data, static_cast<size_t>(std::max(len, 0L)));
  BIO_free(bio);
  return Printable(subject);
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// `status` with its message replaced.
Status Retold(const Status& status, std::string message) {
  switch (status.code()) {
    case Status::Code::kTimedOut:
      return Status::TimedOut(std::move(message));
    case Status::Code::kTruncated:
      return Status::Truncated(std::move(message));
    case Status::Code::kIoError:
      return Status::IoError(std::move(message));
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(std::move(message));
    case Status::Code::kInternal:
      return Status::Internal(std::move(message));
    default:
      return Status::Corruption(std::move(message));
  }
}

}  // namespace

Result<std::vector<uint8_t>> TlsPskFromKey(const SharedKey& key) {
  const std::vector<uint8_t>& text = key.secret;
  bool hex = !text.empty() && text.size() % 2 == 0 &&
             std::all_of(text.begin(), text.end(), [](uint8_t c) { return std::isxdigit(c) != 0; });
  std::vector<uint8_t> psk;
  if (hex) {
    for (size_t i = 0; i < text.size(); i += 2)
      psk.push_back(static_cast<uint8_t>(HexDigitValue(static_cast<char>(text[i])) << 4 |
                                         HexDigitValue(static_cast<char>(text[i + 1]))));
  } else {
    psk = text;
  }
  std::string spelled = hex ? " (written in hex, " + std::to_string(text.size()) + " digits)" : "";
  if (psk.size() < kMinKeyBytes || psk.size() > kMaxPskBytes) {
    size_t n = psk.size();
    OPENSSL_cleanse(psk.data(), psk.size());
    return Status::InvalidArgument(key.origin + " is a key of " + std::to_string(n) + " bytes" + spelled +
                                   "; TLS needs " + std::to_string(kMinKeyBytes) + " to " +
                                   std::to_string(kMaxPskBytes) + " (make one with `vramflow keygen`)");
  }
  return psk;
}

Result<std::unique_ptr<TlsContext>> TlsContext::Create(const TlsCredentials& credentials, Role role) {
  const bool certs = !credentials.cert_file.empty() || !credentials.key_file.empty() || !credentials.ca_file.empty();
  if (credentials.key && certs)
    return Status::InvalidArgument("both a shared key (" + credentials.key->origin +
                                   ") and certificates were given: use one (--key-file, or --cert, --key and --ca)");
  if (!credentials.key && !certs)
    return Status::InvalidArgument(
        "no TLS credentials: give a shared key (--key-file) or a certificate (--cert, --key, --ca)");
  if (certs) {
    std::string missing;
    if (credentials.cert_file.empty()) missing += " --cert";
    if (credentials.key_file.empty()) missing += " --key";
    if (credentials.ca_file.empty()) missing += " --ca";
    if (!missing.empty())
      return Status::InvalidArgument(
          "mutual TLS needs a certificate, its private key and the CA of the peers: missing" + missing);
  }

  std::unique_ptr<TlsContext> context(new TlsContext);
  context->role_ = role;
  SSL_CTX* ctx = SSL_CTX_new(role == Role::kServer ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return Status::Internal("creating a TLS context failed in OpenSSL: " + TakeErrors());
  context->ctx_ = ctx;
  bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
            SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 && SSL_CTX_set1_groups_list(ctx, kGroups) == 1 &&
            SSL_CTX_set_num_tickets(ctx, 0) == 1 &&
            SSL_CTX_set_ciphersuites(ctx, credentials.key ? kPskSuites : kCertSuites) == 1;
  if (!ok) return Status::Internal("setting up the TLS context failed in OpenSSL: " + TakeErrors());
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // psk_dhe_ke only: without this option OpenSSL neither offers nor accepts
  // a PSK without (EC)DHE. Cleared explicitly so that no default can change it.
  SSL_CTX_clear_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  if (credentials.ktls) SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);

  if (credentials.key) {
    VF_ASSIGN_OR_RETURN(context->psk_, TlsPskFromKey(*credentials.key));
    SSL_CTX_set_app_data(ctx, &context->psk_);
    if (role == Role::kServer) SSL_CTX_set_psk_find_session_callback(ctx, FindPsk);
    else SSL_CTX_set_psk_use_session_callback(ctx, UsePsk);
    context->describe_ = "shared key (" + credentials.key->origin + ")";
    return context;
  }

  const std::string& cert = credentials.cert_file;
  const std::string& key = credentials.key_file;
  const std::string& ca = credentials.ca_file;
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1)
    return Status::InvalidArgument("cannot use the certificate '" + cert + "' (a PEM file): " + TakeErrors());
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
    return Status::InvalidArgument("cannot use the private key '" + key + "' (a PEM file) with the certificate '" +
                                   cert + "': " + TakeErrors());
  if (SSL_CTX_check_private_key(ctx) != 1)
    return Status::InvalidArgument("the private key '" + key + "' does not belong to the certificate '" + cert +
                                   "': " + TakeErrors());
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1)
    return Status::InvalidArgument("cannot use the CA '" + ca + "' (PEM certificates): " + TakeErrors());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  context->describe_ = "certificate '" + cert + "' (CA '" + ca + "')";
  return context;
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
  if (!psk_.empty()) OPENSSL_cleanse(psk_.data(), psk_.size());
}

template <typename Op>
Result<int> TlsConnection::Drive(Op op, milliseconds timeout, bool whole_timeout, const std::string& what) {
  std::optional<Deadline> deadline;
  if (whole_timeout) deadline.emplace(timeout);
  for (;;) {
    int result;
    int error;
    int saved_errno;
    std::string reason;
    bool eof_in_record = false;
    {
      std::lock_guard lock(mu_);
      if (broken_) return Status::IoError(what + ": the connection failed earlier");
      ERR_clear_error();
      errno = 0;
      result = op(ssl_);
      if (result > 0) return result;
      error = SSL_get_error(ssl_, result);
      saved_errno = errno;
      if (error == SSL_ERROR_SSL) {
        unsigned long first = ERR_peek_error();
        eof_in_record =
            ERR_GET_LIB(first) == ERR_LIB_SSL && ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
        reason = TakeErrors();
      } else {
        ERR_clear_error();
      }
    }
    switch (error) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE: {
        if (!deadline) deadline.emplace(timeout);
        short events = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        VF_ASSIGN_OR_RETURN(bool ready, WaitFor(fd_.get(), events, *deadline, what));
        if (!ready)
          return Status::TimedOut(what + ": " + (whole_timeout ? "not done" : "no progress") + " within " +
                                  FormatSeconds(timeout) +
                                  (events == POLLIN ? " (the peer sent nothing)" : " (the peer stopped reading)"));
        if (!whole_timeout) deadline.reset();  // the socket moved: progress
        continue;
      }
      case SSL_ERROR_ZERO_RETURN:
        return Status::Truncated(what + ": the peer closed the connection");
      case SSL_ERROR_SYSCALL:
        if (saved_errno != 0) return Status::FromErrno(what, saved_errno);
        return Status::Truncated(what + ": the peer closed the connection");
      default:
        if (eof_in_record) return Status::Truncated(what + ": the peer closed the connection");
        return Status::Corruption(what + ": " + reason);
    }
  }
}

Result<std::unique_ptr<TlsConnection>> TlsConnection::Handshake(const TlsContext& context, UniqueFd fd,
                                                                const std::string& server_host, milliseconds timeout,
                                                                const std::string& peer) {
  const std::string what = "TLS handshake with " + peer;
  SigpipeBlock no_sigpipe;
  SSL* ssl = SSL_new(context.ctx_);
  if (ssl == nullptr) return Status::Internal(what + ": creating the connection failed in OpenSSL: " + TakeErrors());
  std::unique_ptr<TlsConnection> conn(new TlsConnection(std::move(fd), ssl));
  if (SSL_set_fd(ssl, conn->fd_.get()) != 1) return Status::Internal(what + ": SSL_set_fd: " + TakeErrors());
  const bool client = context.role() == TlsContext::Role::kClient;
  if (client) {
    SSL_set_connect_state(ssl);
    if (!context.shared_key()) {
      // The receiver's certificate must name the host we connected to.
      if (server_host.empty()) return Status::InvalidArgument(what + ": no host name to check its certificate against");
      bool named =
          IsIpAddress(server_host)
              ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), server_host.c_str()) == 1
              : SSL_set1_host(ssl, server_host.c_str()) == 1 && SSL_set_tlsext_host_name(ssl, server_host.c_str()) == 1;
      if (!named) return Status::InvalidArgument(what + ": cannot check a certificate against '" + server_host + "'");
    }
  } else {
    SSL_set_accept_state(ssl);
  }

  HandshakeNotes notes;
  SSL_set_app_data(ssl, &notes);
  Result<int> done = conn->Drive([](SSL* s) { return SSL_do_handshake(s); }, timeout, /*whole_timeout=*/true, what);
  SSL_set_app_data(ssl, nullptr);
  if (!done.ok()) {
    std::string why = done.status().message();
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) why += " (certificate: " + std::string(X509_verify_cert_error_string(verify)) + ")";
    if (!client && context.shared_key() && done.status().code() == Status::Code::kCorruption) {
      if (!notes.offered_identity) why += " (the peer offered no pre-shared key: does it use certificates, or no key?)";
      else if (*notes.offered_identity != kTlsPskIdentity)
        why += " (the peer offered PSK identity " + *notes.offered_identity + ", not '" + kTlsPskIdentity + "')";
    }
    // OpenSSL refused the handshake itself (a different key, a certificate
    // that does not verify, no common credentials): an authentication
    // failure, not corrupt data. Timeouts and cut connections keep theirs.
    if (done.status().code() == Status::Code::kCorruption) return Status::Unauthenticated(why);
    return Retold(done.status(), why);
  }

  conn->cipher_ = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl));
  if (context.shared_key()) {
    conn->peer_identity_ = std::string("PSK identity '") + kTlsPskIdentity + "'";
  } else {
    conn->peer_identity_ = "certificate " + CertificateSubject(SSL_get0_peer_certificate(ssl));
  }
  return conn;
}

TlsConnection::~TlsConnection() {
  SigpipeBlock no_sigpipe;
  std::lock_guard lock(mu_);
  // close_notify, once, without waiting for the peer's: the protocol has its
  // own end (END, DONE), so this only lets a careful peer tell a close from a
  // cut.
  if (!broken_ && SSL_is_init_finished(ssl_)) (void)SSL_shutdown(ssl_);
  ERR_clear_error();
  SSL_free(ssl_);
}

Status TlsConnection::SendAll(std::span<const uint8_t> data, milliseconds timeout, const std::string& what) {
  SigpipeBlock no_sigpipe;
  while (!data.empty()) {
    int n = static_cast<int>(std::min<size_t>(data.size(), INT_MAX));
    // Without partial writes SSL_write returns only once all n bytes are
    // sent; after WANT_WRITE it is called again with the same buffer.
    Result<int> sent = Drive([&](SSL* s) { return SSL_write(s, data.data(), n); }, timeout, false, what);
    if (!sent.ok()) {
      // Half a record may be out: nothing more can go on this connection.
      std::lock_guard lock(mu_);
      broken_ = true;
      return sent.status();
    }
    data = data.subspan(static_cast<size_t>(*sent));
  }
  return Status::Ok();
}

Status TlsConnection::RecvAll(std::span<uint8_t> data, milliseconds timeout, const std::string& what) {
  SigpipeBlock no_sigpipe;  // reading may answer a KeyUpdate or send an alert
  const size_t total = data.size();
  while (!data.empty()) {
    int n = static_cast<int>(std::min<size_t>(data.size(), INT_MAX));
    Result<int> got = Drive([&](SSL* s) { return SSL_read(s, data.data(), n); }, timeout, false, what);
    if (!got.ok()) {
      if (got.status().code() == Status::Code::kTruncated)
        return Status::Truncated(what + ": the peer closed the connection after " +
                                 std::to_string(total - data.size()) + " of " + std::to_string(total) + " bytes");
      return got.status();
    }
    data = data.subspan(static_cast<size_t>(*got));
  }
  return Status::Ok();
}

void TlsConnection::Shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

bool TlsConnection::ktls_send() const {
  std::lock_guard lock(mu_);
  return BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
}

bool TlsConnection::ktls_recv() const {
  std::lock_guard lock(mu_);
  return BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0;
}

}  // namespace vramflow
