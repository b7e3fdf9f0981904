// SPDX-License-Identifier: MIT
#include "transport/net/shared_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/unique_fd.h"

namespace vramflow {
namespace {

// A key file larger than this is certainly not a key (a wrong path, say).
constexpr size_t kMaxKeyFileBytes = 64 << 10;
// RAND_bytes takes an int length.
constexpr size_t kMaxRandomPiece = size_t{1} << 30;

// The oldest OpenSSL error on this thread's queue (clearing it), for messages.
std::string OpenSslError(const std::string& what) {
  unsigned long err = ERR_get_error();
  ERR_clear_error();
  if (err == 0) return what + " failed in OpenSSL";
  char buf[256];
  ERR_error_string_n(err, buf, sizeof(buf));
  return what + " failed in OpenSSL: " + buf;
}

bool IsTrailingSpace(uint8_t c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; }

void StripTrailingWhitespace(std::vector<uint8_t>* bytes) {
  while (!bytes->empty() && IsTrailingSpace(bytes->back())) bytes->pop_back();
}

// Wipes the secret bytes before the vector frees them.
void Wipe(std::vector<uint8_t>* bytes) {
  if (!bytes->empty()) OPENSSL_cleanse(bytes->data(), bytes->size());
  bytes->clear();
}

Status CheckLength(std::vector<uint8_t>* secret, const std::string& origin) {
  if (secret->size() >= kMinKeyBytes) return Status::Ok();
  size_t n = secret->size();
  Wipe(secret);
  return Status::InvalidArgument(origin + " holds " + std::to_string(n) + " byte(s) of key; at least " +
                                 std::to_string(kMinKeyBytes) + " are needed (make one with `vramflow keygen`)");
}

}  // namespace

Result<SharedKey> LoadKeyFile(const std::string& path) {
  std::string origin = "key file '" + path + "'";
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) return Status::FromErrno("opening " + origin, errno);
  int fd = file.get();

  // fstat the opened file, so the checked file is the one read.
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + origin, errno);
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(origin + " is a directory");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(origin + " is readable or writable by group or others (mode " + mode +
                                   "); restrict it with: chmod 600 '" + path + "'");
  }

  SharedKey key;
  key.origin = origin;
  std::vector<uint8_t>& bytes = key.secret;
  bytes.resize(kMaxKeyFileBytes + 1);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      Wipe(&bytes);
      return Status::FromErrno("reading " + origin, err);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done > kMaxKeyFileBytes) {
    Wipe(&bytes);
    return Status::InvalidArgument(origin + " is larger than " + std::to_string(kMaxKeyFileBytes) +
                                   " bytes; is it really a key?");
  }
  bytes.resize(done);
  StripTrailingWhitespace(&bytes);
  VF_RETURN_IF_ERROR(CheckLength(&bytes, origin));
  return key;
}

Result<std::optional<SharedKey>> ResolveKey(const std::string& key_file) {
  if (!key_file.empty()) {
    VF_ASSIGN_OR_RETURN(SharedKey key, LoadKeyFile(key_file));
    return std::optional<SharedKey>(std::move(key));
  }
  const char* env_file = std::getenv("VRAMFLOW_KEY_FILE");
  if (env_file != nullptr && *env_file != '\0') {
    auto key = LoadKeyFile(env_file);
    if (!key.ok()) return key.status().WithContext("VRAMFLOW_KEY_FILE");
    return std::optional<SharedKey>(std::move(key).value());
  }
  const char* env_key = std::getenv("VRAMFLOW_KEY");
  if (env_key != nullptr && *env_key != '\0') {
    SharedKey key;
    key.origin = "VRAMFLOW_KEY";
    key.secret.assign(env_key, env_key + std::strlen(env_key));
    StripTrailingWhitespace(&key.secret);
    VF_RETURN_IF_ERROR(CheckLength(&key.secret, key.origin));
    return std::optional<SharedKey>(std::move(key));
  }
  return std::optional<SharedKey>();
}

Result<std::string> GenerateKeyText() {
  std::array<uint8_t, 32> raw;
  VF_RETURN_IF_ERROR(RandomBytes(raw));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(raw.size() * 2);
  for (uint8_t b : raw) {
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 0xf]);
  }
  OPENSSL_cleanse(raw.data(), raw.size());
  return text;
}

Status RandomBytes(std::span<uint8_t> out) {
  while (!out.empty()) {
    size_t piece = std::min(out.size(), kMaxRandomPiece);
    if (RAND_bytes(out.data(), static_cast<int>(piece)) != 1)
      return Status::Internal(OpenSslError("generating random bytes"));
    out = out.subspan(piece);
  }
  return Status::Ok();
}

}  // namespace vramflow
