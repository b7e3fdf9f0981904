// SPDX-License-Identifier: MIT
#include "transport/s3/s3_encryption.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <string_view>

#include "common/unique_fd.h"
#include "transport/aws/sigv4.h"

namespace vramflow::s3 {
namespace {

// The 32 bytes a 44-character base64 text stands for, or "" if it is not one.
std::string DecodeKeyBase64(std::string_view text) {
  if (text.size() != 44 || text[43] != '=' || text[42] == '=') return "";
  for (char c : text.substr(0, 43))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return "";
  std::string out(33, '\0');  // EVP_DecodeBlock counts the padding as a zero byte
  if (EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(text.data()),
                      static_cast<int>(text.size())) != 33)
    return "";
  out.resize(kCustomerKeyBytes);
  return out;
}

// Whether `host` ("NAME[:PORT]", "[V6][:PORT]") is this machine's loopback.
bool IsLoopback(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name[0] == '[') {
    name = name.substr(1, name.find(']') - 1);
  } else if (size_t colon = name.rfind(':'); colon != std::string::npos) {
    name.resize(colon);
  }
  if (name == "localhost" || name == "::1") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace

Status CheckEncryptionModes(const std::string& sse, const std::string& kms_key_id, bool customer_key) {
  if (!sse.empty() && sse != "AES256" && sse != "aws:kms")
    return Status::InvalidArgument("--sse: '" + sse + "' is neither AES256 (SSE-S3) nor aws:kms (SSE-KMS)");
  if (!kms_key_id.empty() && sse != "aws:kms") return Status::InvalidArgument("--sse-kms-key-id needs --sse aws:kms");
  if (customer_key && !sse.empty())
    return Status::InvalidArgument(
        "--sse-c-key and --sse cannot go together: an object has one kind of "
        "server-side encryption");
  return Status::Ok();
}

Status CheckEncryption(const S3Encryption& encryption, const std::string& scheme, const std::string& host) {
  VF_RETURN_IF_ERROR(CheckEncryptionModes(encryption.sse, encryption.kms_key_id, !encryption.customer_key.empty()));
  if (encryption.customer_key.empty()) return Status::Ok();
  if (encryption.customer_key.size() != kCustomerKeyBytes)
    return Status::InvalidArgument("--sse-c-key: the key is " + std::to_string(encryption.customer_key.size()) +
                                   " bytes, not " + std::to_string(kCustomerKeyBytes));
  if (scheme != "https" && !IsLoopback(host))
    return Status::InvalidArgument("--sse-c-key: the endpoint " + scheme + "://" + host +
                                   " is not https, and every request would carry the key across the network in "
                                   "the clear");
  return Status::Ok();
}

void AddCreateHeaders(const S3Encryption& encryption, Headers* headers) {
  if (!encryption.sse.empty()) headers->emplace_back("x-amz-server-side-encryption", encryption.sse);
  if (!encryption.kms_key_id.empty())
    headers->emplace_back("x-amz-server-side-encryption-aws-kms-key-id", encryption.kms_key_id);
  AddCustomerKeyHeaders(encryption, headers);
}

Status CheckApplied(const S3Encryption& encryption, const Response& reply) {
  std::string missing;
  if (!encryption.sse.empty() && reply.Header("x-amz-server-side-encryption") != encryption.sse)
    missing = "x-amz-server-side-encryption: " + encryption.sse;
  else if (!encryption.customer_key.empty() &&
           reply.Header("x-amz-server-side-encryption-customer-algorithm") != "AES256")
    missing = "x-amz-server-side-encryption-customer-algorithm: AES256";
  if (missing.empty()) return Status::Ok();
  return Status::NotSupported("S3 did not confirm the server-side encryption asked for: its reply has no '" + missing +
                              "'");
}

void AddCustomerKeyHeaders(const S3Encryption& encryption, Headers* headers) {
  if (encryption.customer_key.empty()) return;
  const std::span<const uint8_t> key(reinterpret_cast<const uint8_t*>(encryption.customer_key.data()),
                                     encryption.customer_key.size());
  headers->emplace_back("x-amz-server-side-encryption-customer-algorithm", "AES256");
  headers->emplace_back("x-amz-server-side-encryption-customer-key", Base64(key));
  headers->emplace_back("x-amz-server-side-encryption-customer-key-MD5", Md5Base64(key));
}

Result<std::string> LoadCustomerKey(const std::string& path) {
  const std::string what = "SSE-C key file '" + path + "'";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("opening " + what, errno);
  constexpr size_t kReadAtMost = 64;  // a valid key file has at most 46 bytes
  std::string bytes(kReadAtMost, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("reading " + what, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  if (bytes.size() == kCustomerKeyBytes) return bytes;
  std::string_view text = bytes;
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (text.ends_with('\r')) text.remove_suffix(1);
  std::string key = DecodeKeyBase64(text);
  if (!key.empty()) return key;
  return Status::InvalidArgument(what + ": " + (got == kReadAtMost ? "more than 46" : std::to_string(got)) +
                                 " bytes, neither a key of 32 bytes nor their base64 (44 characters)");
}

}  // namespace vramflow::s3
