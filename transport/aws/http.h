// SPDX-License-Identifier: MIT
// Small HTTP requests to AWS's credential services (STS, the container
// credentials endpoint, EC2 instance metadata) over libcurl, and the TLS
// trust settings (CA bundle) that S3 requests share with them.
//
// Bounded: the reply body is at most HttpCall::max_reply bytes and the whole
// call takes at most HttpCall::timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace vramflow::s3 {

// Which CAs an HTTPS server's certificate must chain to. Empty = libcurl's
// default (the system's store). Resolved in s3_config.h.
struct TlsTrust {
  std::string ca_file;  // PEM bundle (--ca-bundle, AWS_CA_BUNDLE, ca_bundle, SSL_CERT_FILE)
  std::string ca_dir;   // hashed directory (SSL_CERT_DIR)
  std::string source;   // for messages: "--ca-bundle", "AWS_CA_BUNDLE", ...
};

// Sets CURLOPT_CAINFO / CURLOPT_CAPATH on a libcurl easy handle (CURL*).
void ApplyTlsTrust(void* curl_handle, const TlsTrust& trust);

// What to tell a user whose HTTPS request failed certificate verification.
std::string CertificateHint(const TlsTrust& trust);

struct HttpCall {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{5000};
  size_t max_reply = 64 * 1024;
  TlsTrust trust;
};

struct HttpReply {
  long status = 0;
  std::string body;
};

// One request, no retries. Transport failures (refused, timed out, reply too
// large, certificate not trusted) are errors naming the URL; any HTTP status
// is a reply.
Result<HttpReply> Http(const HttpCall& call);

// application/x-www-form-urlencoded value (STS's request bodies).
std::string FormEncode(const std::string& s);

}  // namespace vramflow::s3
