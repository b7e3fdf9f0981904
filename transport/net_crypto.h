// Shared-key cryptography for the network protocol, on OpenSSL: loading the
// key, HMAC-SHA256 proofs for mutual challenge-response, HKDF-SHA256 session
// keys, and AES-256-GCM sealing of protocol messages. The key itself never
// goes on the wire.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/shared_key.h"

namespace vramflow {

using Digest = std::array<uint8_t, 32>;
// HMAC-SHA256 over the concatenation of `parts`.
Digest HmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts);
// Constant-time comparison.
bool DigestsEqual(const Digest& a, const Digest& b);
// HKDF-SHA256 (RFC 5869) producing one 32-byte key.
Digest HkdfSha256(std::span<const uint8_t> secret, std::span<const uint8_t> salt, std::span<const uint8_t> info);

// AES-256-GCM with a 96-bit nonce built from a 64-bit message counter (the
// caller never reuses a counter under one key). Holds an OpenSSL context;
// one user at a time.
class Aead {
 public:
  static constexpr size_t kTagBytes = 16;
  explicit Aead(const Digest& key);
  ~Aead();
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  // Encrypts `data` in place and writes the tag. `aad` is authenticated, not
  // encrypted. With encrypt = false, `data` stays plain but is still
  // authenticated (GMAC over aad and data).
  Status Seal(uint64_t counter, std::span<const uint8_t> aad, std::span<uint8_t> data, bool encrypt,
              std::span<uint8_t, kTagBytes> tag);
  // Checks the tag and decrypts in place; kCorruption if anything (aad, data,
  // tag, counter, key) differs from what was sealed.
  Status Open(uint64_t counter, std::span<const uint8_t> aad, std::span<uint8_t> data, bool encrypted,
              std::span<const uint8_t, kTagBytes> tag);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  Digest key_;
};

}  // namespace vramflow
