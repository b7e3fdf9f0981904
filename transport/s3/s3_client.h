// SPDX-License-Identifier: MIT
// S3 requests over libcurl: signing, connection reuse, timeouts and retries.
//
// One Client serves one bucket and is thread-safe: each request in flight
// takes an easy handle from a pool and gives it back, so a thread uploading
// part after part reuses its connection (libcurl keeps it in the handle).
// Every request is retried with exponential backoff and jitter on what may
// pass: connection errors and stalls, HTTP 5xx, 429, and S3's SlowDown /
// RequestTimeout / InternalError codes. Other errors return at once.
// Errors name the object, the operation ("UploadPart 7") and the last HTTP
// status and S3 error code.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "transport/s3/s3_config.h"
#include "transport/s3/s3_options.h"

namespace vramflow::s3 {

struct CurlApi;  // curl_library.h

struct Request {
  std::string method;  // GET PUT POST HEAD DELETE
  std::string key;     // object key; "" addresses the bucket
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Range, Content-MD5, If-Match
  std::span<const uint8_t> body;                             // must outlive Send()
  bool sign_payload = true;                                  // false: UNSIGNED-PAYLOAD
  // S3 can answer CompleteMultipartUpload with 200 and an <Error> body;
  // set for such operations to treat that body as the error it is.
  bool error_in_ok_body = false;
  // Statuses besides 2xx that are answers, not errors: returned as the
  // Response (HEAD for "is there an object?": 404), never retried.
  std::vector<long> answers;
  std::string what;  // "UploadPart 7 (bytes 0-8388607)", for messages
};

struct Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string Header(const std::string& lower_name) const;
};

class Client {
 public:
  Client(Config config, const S3Options& options, std::string bucket);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` until it succeeds (2xx) or fails for good. A set
  // `*cancel` stops at the next progress tick or backoff wait (kCancelled).
  Result<Response> Send(const Request& request, const std::atomic<bool>* cancel = nullptr);

  // "s3://bucket/key".
  std::string Uri(const std::string& key) const { return "s3://" + bucket_ + "/" + key; }
  const std::string& bucket() const { return bucket_; }
  const Config& config() const { return config_; }
  // The objects' server-side encryption (s3_encryption.h adds its headers).
  const S3Encryption& encryption() const { return encryption_; }

  // Keys under `prefix` (ListObjectsV2, first 1000): for tests and tools.
  Result<std::vector<std::string>> ListKeys(const std::string& prefix);

 private:
  struct Attempt;
  class HandlePool;
  Attempt SendOnce(const Request& request, const std::atomic<bool>* cancel);
  std::string Url(const Request& request, std::string* host, std::string* path) const;

  Config config_;
  std::string bucket_;
  std::chrono::milliseconds connect_timeout_, stall_timeout_, backoff_base_, backoff_max_;
  unsigned retries_;
  S3Encryption encryption_;
  std::unique_ptr<HandlePool> pool_;
  // libcurl (curl_library.h); null where it could not be opened, and every
  // request fails with `curl_status_`.
  const CurlApi* curl_ = nullptr;
  Status curl_status_;
};

}  // namespace vramflow::s3
