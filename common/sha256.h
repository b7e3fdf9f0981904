// SPDX-License-Identifier: MIT
// SHA-256 (OpenSSL): the collision-resistant hash that identifies streams and
// proves a base's chunk before its bytes stand in for a reference
// (docs/FORMAT.md 4.9 to 4.12). XXH3 (hash.h) stays the in-stream check.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace vramflow {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(const void* data, size_t size);
inline Sha256Digest Sha256(std::span<const uint8_t> data) { return Sha256(data.data(), data.size()); }

// Lower-case hex, 64 characters.
std::string HexDigest(const Sha256Digest& digest);
// Parses 64 hex characters; false otherwise.
bool ParseHexDigest(const std::string& text, Sha256Digest* digest);

// Incremental SHA-256 over several pieces. Not thread-safe.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(const void* data, size_t size);
  void Update(std::span<const uint8_t> data) { Update(data.data(), data.size()); }
  // The digest of everything added; the hasher is spent afterwards.
  Sha256Digest Final();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace vramflow
