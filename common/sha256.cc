// SPDX-License-Identifier: MIT
#include "common/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

#include "common/hex.h"

namespace vramflow {

struct Sha256Hasher::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256Hasher::Sha256Hasher() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  // Only allocation can fail here; without a digest nothing is safe to do.
  if (!context_->ctx || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256Hasher::~Sha256Hasher() = default;

void Sha256Hasher::Update(const void* data, size_t size) {
  if (size) EVP_DigestUpdate(context_->ctx, data, size);
}

Sha256Digest Sha256Hasher::Final() {
  Sha256Digest out{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->ctx, out.data(), &length);
  return out;
}

Sha256Digest Sha256(const void* data, size_t size) {
  Sha256Digest out{};
  unsigned int length = 0;
  if (EVP_Digest(data, size, out.data(), &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not compute a SHA-256 digest");
  return out;
}

std::string HexDigest(const Sha256Digest& digest) {
  std::string out(64, '0');
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

bool ParseHexDigest(const std::string& text, Sha256Digest* digest) {
  if (text.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexDigitValue(text[2 * i]), lo = HexDigitValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*digest)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace vramflow
