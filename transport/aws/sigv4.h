// SPDX-License-Identifier: MIT
// AWS Signature Version 4 for S3 requests (header-based), and the hashes S3
// requests need (SHA-256 payload hashes, Content-MD5).
//
// Spec: "Authenticating Requests: Using the Authorization Header (AWS
// Signature Version 4)" in the S3 API reference; tests/s3_unit_test.cc
// reproduces its worked examples. Everything here is a pure function of its
// arguments (the clock is passed in), so it is thread-safe and testable.
#pragma once

#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vramflow::s3 {

// SHA-256 of the empty string: the payload hash of bodiless requests.
inline constexpr std::string_view kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// Payload hash for requests whose body is not hashed (we use it for GETs).
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

std::string Sha256Hex(std::span<const uint8_t> data);
std::string Sha256Hex(std::string_view data);
std::string Md5Hex(std::span<const uint8_t> data);
// Standard base64, padded: header values (Content-MD5, an SSE-C key).
std::string Base64(std::span<const uint8_t> data);
// base64(MD5(data)): the value of a Content-MD5 header.
std::string Md5Base64(std::span<const uint8_t> data);
// The ETag S3 gives an object completed from parts with these ETags, quotes
// included: "\"" + hex(MD5(the parts' MD5s, concatenated)) + "-N\"". Empty
// when a part's ETag is not a quoted 32-digit MD5 (SSE-KMS or SSE-C parts,
// whose ETags are no digest of their bytes): the object's ETag is then unknown.
std::string MultipartETag(const std::vector<std::string>& part_etags);

// S3's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ becomes %XX
// (upper-case hex); '/' is kept when `keep_slash` (object key paths).
std::string UriEncode(std::string_view s, bool keep_slash);

// "20130524T000000Z" for `t` (UTC).
std::string AmzDate(std::time_t t);

struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // optional (temporary credentials)
};

// One request as SigV4 sees it. `path` is already URI-encoded (as sent);
// query values are raw (encoded here); header names any case.
struct SignRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // must include host and x-amz-date
  std::string payload_hash;                                  // also sent as x-amz-content-sha256
};

// The canonical request (exposed for tests and debugging).
std::string CanonicalRequest(const SignRequest& request, std::string* signed_headers);

// The Authorization header value: "AWS4-HMAC-SHA256 Credential=...,
// SignedHeaders=..., Signature=...". `amz_date` must equal the request's
// x-amz-date header.
// `service` is the signing name: "s3", or "sts" for the credential chain.
std::string Authorization(const Credentials& credentials, const std::string& region, const std::string& amz_date,
                          const SignRequest& request, std::string_view service = "s3");

// The canonical query string: sorted by key, keys and values URI-encoded.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);

}  // namespace vramflow::s3
