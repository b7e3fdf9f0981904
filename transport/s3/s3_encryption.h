// SPDX-License-Identifier: MIT
// The headers that ask S3 to encrypt objects at rest (SSE-S3, SSE-KMS) or
// that carry the customer's key (SSE-C), per request kind, and the checks
// of those settings. See docs/S3.md, "Encryption".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_options.h"

namespace vramflow::s3 {

using Headers = std::vector<std::pair<std::string, std::string>>;

inline constexpr size_t kCustomerKeyBytes = 32;

// Whether the modes go together: a known sse mode, a KMS key id only with
// aws:kms, SSE-C (`customer_key`) alone. Errors name the flags.
Status CheckEncryptionModes(const std::string& sse, const std::string& kms_key_id, bool customer_key);
// Whether `encryption` can be used with an endpoint of `scheme` ("http" or
// "https") on `host` ("HOST[:PORT]"): its modes go together, an SSE-C key
// has 32 bytes and goes over http only to a loopback address (it would
// otherwise cross the network in the clear).
Status CheckEncryption(const S3Encryption& encryption, const std::string& scheme, const std::string& host);

// For requests that create an object (PutObject, CreateMultipartUpload).
void AddCreateHeaders(const S3Encryption& encryption, Headers* headers);
// Whether the reply to a request that created an object says S3 encrypts
// it as asked (AWS and Ceph RGW echo the mode); an error naming the header
// missing where it does not (Ceph RGW 16 ignores --sse AES256).
Status CheckApplied(const S3Encryption& encryption, const Response& reply);
// For the other requests on an object's data or metadata (UploadPart,
// CompleteMultipartUpload, GetObject, HeadObject): SSE-C's key, if any.
void AddCustomerKeyHeaders(const S3Encryption& encryption, Headers* headers);

// An SSE-C key from `path`: its 32 bytes, raw, or in base64 (44 characters,
// a line end after them allowed), as `openssl rand 32` or `openssl rand
// -base64 32` writes one.
Result<std::string> LoadCustomerKey(const std::string& path);

}  // namespace vramflow::s3
