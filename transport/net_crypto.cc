#include "transport/net_crypto.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "common/unique_fd.h"

namespace vramflow {
namespace {

// EVP update calls take int lengths; feed larger spans in pieces.
constexpr size_t kMaxUpdateBytes = size_t{1} << 30;

struct MacDeleter {
  void operator()(EVP_MAC* p) const { EVP_MAC_free(p); }
};
struct MacCtxDeleter {
  void operator()(EVP_MAC_CTX* p) const { EVP_MAC_CTX_free(p); }
};
struct KdfDeleter {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxDeleter {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};
struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using CipherCtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;

// The oldest OpenSSL error on this thread's queue (clearing it), for messages.
std::string OpenSslError(const std::string& what) {
  unsigned long err = ERR_get_error();
  ERR_clear_error();
  if (err == 0) return what + " failed in OpenSSL";
  char buf[256];
  ERR_error_string_n(err, buf, sizeof(buf));
  return what + " failed in OpenSSL: " + buf;
}

// HmacSha256 and HkdfSha256 return plain digests: their OpenSSL calls only fail
// when the library itself is broken (no SHA256 provider, no memory). Going on
// with a made-up digest could make two peers agree on a zero key, so stop.
[[noreturn]] void CryptoFailure(const std::string& what) {
  std::fprintf(stderr, "vramflow: fatal: %s\n", OpenSslError(what).c_str());
  std::abort();
}

// OpenSSL refuses a NULL buffer even with length 0; point empty spans here.
const uint8_t* NonNull(std::span<const uint8_t> s) {
  static constexpr uint8_t kEmpty = 0;
  return s.data() != nullptr ? s.data() : &kEmpty;
}

// Feeds `data` to an EVP cipher update in int-sized pieces; out == nullptr
// passes it as additional authenticated data.
bool CipherUpdate(EVP_CIPHER_CTX* ctx, uint8_t* out, const uint8_t* in, size_t n) {
  while (n > 0) {
    int piece = static_cast<int>(std::min(n, kMaxUpdateBytes));
    int written = 0;
    if (EVP_CipherUpdate(ctx, out, &written, in, piece) != 1) return false;
    in += piece;
    if (out != nullptr) out += piece;
    n -= static_cast<size_t>(piece);
  }
  return true;
}

}  // namespace

Digest HmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts) {
  std::unique_ptr<EVP_MAC, MacDeleter> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) CryptoFailure("fetching HMAC");
  std::unique_ptr<EVP_MAC_CTX, MacCtxDeleter> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) CryptoFailure("creating an HMAC context");
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx.get(), NonNull(key), key.size(), params) != 1) CryptoFailure("HMAC-SHA256 init");
  for (std::span<const uint8_t> part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1)
      CryptoFailure("HMAC-SHA256 update");
  }
  Digest out;
  size_t out_len = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &out_len, out.size()) != 1 || out_len != out.size())
    CryptoFailure("HMAC-SHA256 final");
  return out;
}

bool DigestsEqual(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

Digest HkdfSha256(std::span<const uint8_t> secret, std::span<const uint8_t> salt, std::span<const uint8_t> info) {
  std::unique_ptr<EVP_KDF, KdfDeleter> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) CryptoFailure("fetching HKDF");
  std::unique_ptr<EVP_KDF_CTX, KdfCtxDeleter> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) CryptoFailure("creating an HKDF context");
  // OSSL_PARAM wants non-const pointers; OpenSSL only reads these.
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(NonNull(secret)), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(NonNull(salt)), salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(NonNull(info)), info.size()),
      OSSL_PARAM_construct_end()};
  Digest out;
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) CryptoFailure("HKDF-SHA256");
  return out;
}

// One cipher context for the Aead's lifetime: the key schedule is set up once;
// each message only sets the direction and the nonce.
struct Aead::Ctx {
  CipherCtxPtr cipher;
  Status init;  // not OK if the constructor could not set the key up
};

namespace {

// 4 zero bytes, then the counter little-endian: unique per message under a key.
std::array<uint8_t, 12> Nonce(uint64_t counter) {
  std::array<uint8_t, 12> nonce{};
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
  return nonce;
}

}  // namespace

Aead::Aead(const Digest& key) : ctx_(std::make_unique<Ctx>()), key_(key) {
  ctx_->cipher.reset(EVP_CIPHER_CTX_new());
  if (!ctx_->cipher) {
    ctx_->init = Status::Internal(OpenSslError("creating an AES-256-GCM context"));
    return;
  }
  EVP_CIPHER_CTX* c = ctx_->cipher.get();
  if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr) != 1 ||
      EVP_EncryptInit_ex(c, nullptr, nullptr, key_.data(), nullptr) != 1) {
    ctx_->init = Status::Internal(OpenSslError("setting up AES-256-GCM"));
  }
}

Aead::~Aead() { OPENSSL_cleanse(key_.data(), key_.size()); }

Status Aead::Seal(uint64_t counter, std::span<const uint8_t> aad, std::span<uint8_t> data, bool encrypt,
                  std::span<uint8_t, kTagBytes> tag) {
  VF_RETURN_IF_ERROR(ctx_->init);
  EVP_CIPHER_CTX* c = ctx_->cipher.get();
  auto nonce = Nonce(counter);
  // A null key keeps the schedule from the constructor; enc = 1 picks encryption.
  bool ok = EVP_CipherInit_ex(c, nullptr, nullptr, nullptr, nonce.data(), 1) == 1 &&
            CipherUpdate(c, nullptr, aad.data(), aad.size()) &&
            CipherUpdate(c, encrypt ? data.data() : nullptr, data.data(), data.size());
  int final_len = 0;
  uint8_t final_block[16];  // GCM writes nothing here; the API wants a buffer
  ok = ok && EVP_EncryptFinal_ex(c, final_block, &final_len) == 1 &&
       EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag.data()) == 1;
  if (!ok) return Status::Internal(OpenSslError("AES-256-GCM seal of message " + std::to_string(counter)));
  return Status::Ok();
}

Status Aead::Open(uint64_t counter, std::span<const uint8_t> aad, std::span<uint8_t> data, bool encrypted,
                  std::span<const uint8_t, kTagBytes> tag) {
  VF_RETURN_IF_ERROR(ctx_->init);
  EVP_CIPHER_CTX* c = ctx_->cipher.get();
  auto nonce = Nonce(counter);
  bool ok = EVP_CipherInit_ex(c, nullptr, nullptr, nullptr, nonce.data(), 0) == 1 &&
            CipherUpdate(c, nullptr, aad.data(), aad.size()) &&
            CipherUpdate(c, encrypted ? data.data() : nullptr, data.data(), data.size()) &&
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                                const_cast<uint8_t*>(tag.data())) == 1;
  if (!ok) return Status::Internal(OpenSslError("AES-256-GCM open of message " + std::to_string(counter)));
  // DecryptFinal compares the tag in constant time.
  int final_len = 0;
  uint8_t final_block[16];
  if (EVP_DecryptFinal_ex(c, final_block, &final_len) != 1) {
    ERR_clear_error();
    // Do not hand out plaintext that failed authentication.
    if (encrypted && !data.empty()) OPENSSL_cleanse(data.data(), data.size());
    return Status::Corruption("message failed authentication (wrong key, tampered or replayed)");
  }
  return Status::Ok();
}

}  // namespace vramflow
