// SPDX-License-Identifier: MIT
#include "transport/s3/s3_client.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "common/printable.h"
#include "transport/aws/curl_library.h"
#include "transport/aws/http.h"
#include "transport/aws/xml.h"

namespace vramflow::s3 {
namespace {

using Clock = std::chrono::steady_clock;

// State one transfer's callbacks share.
struct Transfer {
  std::span<const uint8_t> body;
  size_t max_reply = 0;  // bytes of reply body accepted
  bool overflow = false;
  size_t sent = 0;
  Response* response = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  std::chrono::milliseconds stall_timeout{0};
  curl_off_t last_bytes = -1;
  Clock::time_point last_progress = Clock::now();
  bool stalled = false;
  bool cancelled = false;
};

size_t OnRead(char* buffer, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = std::min(size * n, t->body.size() - t->sent);
  std::memcpy(buffer, t->body.data() + t->sent, len);
  t->sent += len;
  return len;
}

// libcurl rewinds the body when it must resend it (a redirect, a reused
// connection found dead).
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->body.size()) return CURL_SEEKFUNC_FAIL;
  t->sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (t->response->body.size() + size * n > t->max_reply) {
    t->overflow = true;
    return 0;  // aborts the transfer
  }
  t->response->body.append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) t->response->headers.clear();  // a new response (after 100 Continue)
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t b = line.find_first_not_of(" \t", colon + 1);
    size_t e = line.find_last_not_of(" \t\r\n");
    t->response->headers[name] = b == std::string::npos || e < b ? "" : line.substr(b, e - b + 1);
  }
  return size * n;
}

// Stall detection (no byte moved for stall_timeout) and cancellation.
int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  if (t->cancel && t->cancel->load()) {
    t->cancelled = true;
    return 1;
  }
  Clock::time_point now = Clock::now();
  if (dlnow + ulnow != t->last_bytes) {
    t->last_bytes = dlnow + ulnow;
    t->last_progress = now;
  } else if (now - t->last_progress > t->stall_timeout) {
    t->stalled = true;
    return 1;
  }
  return 0;
}

bool RetryableCode(const std::string& code) {
  return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" || code == "ServiceUnavailable" ||
         code == "Throttling" || code == "ThrottlingException" || code == "RequestTimeTooSkewed" ||
         code == "ExpiredToken";  // the next attempt signs with refreshed keys
}

// What to tell a user about an authentication error.
std::string Hint(const std::string& code, const Config& config) {
  if (code == "SignatureDoesNotMatch")
    return ": check AWS_SECRET_ACCESS_KEY (credentials from " + config.credentials_source + ", region " +
           config.region + ")";
  if (code == "InvalidAccessKeyId")
    return ": check AWS_ACCESS_KEY_ID (credentials from " + config.credentials_source + ")";
  if (code == "AuthorizationHeaderMalformed") return ": check the region (AWS_REGION is " + config.region + ")";
  if (code == "NoSuchBucket") return ": create the bucket first";
  return "";
}

// Reply bodies are bounded: a ranged GET's range, else an XML reply's limit.
size_t MaxReply(const Request& request) {
  for (const auto& [k, v] : request.headers) {
    unsigned long long first, last;
    if (k == "Range" && std::sscanf(v.c_str(), "bytes=%llu-%llu", &first, &last) == 2 && last >= first)
      return std::max<size_t>(static_cast<size_t>(last - first + 1), kMaxXmlBytes);
  }
  return kMaxXmlBytes;
}

}  // namespace

std::string Response::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

class Client::HandlePool {
 public:
  CurlEasyHandle Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        CurlEasyHandle h = std::move(free_.back());
        free_.pop_back();
        return h;
      }
    }
    return CurlEasyHandle(OpenedCurl().easy_init());
  }
  void Release(CurlEasyHandle h) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(h));
  }

 private:
  std::mutex mu_;
  std::vector<CurlEasyHandle> free_;  // GUARDED_BY(mu_)
};

// One try's outcome: a response, or a transport failure.
struct Client::Attempt {
  Response response;
  Status error;  // transport failure (curl), or an S3 error reply
  bool retryable = false;
  std::string s3_code;  // S3 error code of an error reply
};

Client::Client(Config config, const S3Options& options, std::string bucket)
    : config_(std::move(config)),
      bucket_(std::move(bucket)),
      connect_timeout_(options.connect_timeout),
      stall_timeout_(options.stall_timeout),
      backoff_base_(options.backoff_base),
      backoff_max_(options.backoff_max),
      retries_(options.retries),
      encryption_(options.encryption),
      pool_(std::make_unique<HandlePool>()) {
  Result<const CurlApi*> curl = OpenCurl();
  if (curl.ok()) curl_ = *curl;
  else curl_status_ = curl.status();
}

Client::~Client() = default;

std::string Client::Url(const Request& request, std::string* host, std::string* path) const {
  std::string key = UriEncode(request.key, true);
  if (config_.path_style) {
    *host = config_.host;
    *path = "/" + bucket_ + (request.key.empty() ? "" : "/" + key);
  } else {
    *host = bucket_ + "." + config_.host;
    *path = "/" + key;
  }
  std::string url = config_.scheme + "://" + *host + *path;
  // Same encoding as the signature's canonical query; a bare "?uploads" for
  // empty values, as the AWS SDKs send it.
  char sep = '?';
  for (const auto& [k, v] : request.query) {
    url += sep;
    url += UriEncode(k, false);
    if (!v.empty()) {
      url += '=';
      url += UriEncode(v, false);
    }
    sep = '&';
  }
  return url;
}

Client::Attempt Client::SendOnce(const Request& request, const std::atomic<bool>* cancel) {
  Attempt attempt;
  if (!curl_) {
    attempt.error = curl_status_;  // not retried
    return attempt;
  }
  std::string host, path;
  std::string url = Url(request, &host, &path);
  std::string amz_date = AmzDate(std::time(nullptr));
  std::string payload_hash = request.sign_payload ? Sha256Hex(request.body) : std::string(kUnsignedPayload);
  Result<Credentials> credentials = config_.credentials->Get();  // refreshed when about to expire
  if (!credentials.ok()) {
    attempt.error = credentials.status();
    // A credential service that did not answer may answer the next try.
    attempt.retryable =
        credentials.status().code() == Status::Code::kIoError || credentials.status().code() == Status::Code::kTimedOut;
    return attempt;
  }

  SignRequest sign{request.method, path, request.query, request.headers, payload_hash};
  sign.headers.emplace_back("host", host);
  sign.headers.emplace_back("x-amz-date", amz_date);
  sign.headers.emplace_back("x-amz-content-sha256", payload_hash);
  if (!credentials->session_token.empty())
    sign.headers.emplace_back("x-amz-security-token", credentials->session_token);
  std::string authorization = Authorization(*credentials, config_.region, amz_date, sign);

  CurlList headers;
  auto add = [&headers, this](const std::string& line) {
    curl_slist* l = curl_->slist_append(headers.get(), line.c_str());
    if (l) {
      headers.release();
      headers.reset(l);
    }
  };
  for (const auto& [k, v] : sign.headers) add(k + ": " + v);
  add("Authorization: " + authorization);
  add("Expect:");  // no 100-continue round trip before each part
  if (request.method == "PUT" || request.method == "POST") add("Content-Type: application/octet-stream");

  CurlEasyHandle handle = pool_->Acquire();
  if (!handle) {
    attempt.error = Status::Internal("curl_easy_init failed");
    return attempt;
  }
  CURL* h = handle.get();
  curl_->easy_reset(h);  // keeps the connection cache
  Transfer t;
  t.body = request.body;
  t.max_reply = MaxReply(request);
  t.response = &attempt.response;
  t.cancel = cancel;
  t.stall_timeout = stall_timeout_;
  curl_->easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_->easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout_.count()));
  curl_->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_->easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  curl_->easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_->easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_->easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_->easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_->easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
  ApplyTlsTrust(h, config_.trust);
  if (request.method == "HEAD") {
    curl_->easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    curl_->easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_->easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
    curl_->easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_->easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_->easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    curl_->easy_setopt(h, CURLOPT_READDATA, &t);
    curl_->easy_setopt(h, CURLOPT_SEEKFUNCTION, OnSeek);
    curl_->easy_setopt(h, CURLOPT_SEEKDATA, &t);
  } else if (request.method != "GET") {
    curl_->easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  CURLcode rc = curl_->easy_perform(h);
  curl_->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &attempt.response.status);
  if (rc != CURLE_OK) {
    curl_->easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    pool_->Release(std::move(handle));
    if (t.cancelled) {
      attempt.error = Status::Cancelled("cancelled");
    } else if (t.overflow) {
      attempt.error = Status::IoError("reply body larger than " + std::to_string(t.max_reply) + " bytes");
    } else if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
      // Not retried: the next try meets the same certificate.
      attempt.error = Status::IoError(std::string(curl_->easy_strerror(rc)) + " (" + url.substr(0, url.find('?')) +
                                      ")" + CertificateHint(config_.trust));
    } else if (t.stalled) {
      attempt.error = Status::TimedOut("no progress for " + std::to_string(stall_timeout_.count()) + " ms");
      attempt.retryable = true;
    } else {
      attempt.error = (rc == CURLE_OPERATION_TIMEDOUT ? Status::TimedOut : Status::IoError)(
          std::string(curl_->easy_strerror(rc)) + " (" + url.substr(0, url.find('?')) + ")");
      attempt.retryable = true;
    }
    return attempt;
  }
  curl_->easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);  // `headers` dies here; the handle lives on
  pool_->Release(std::move(handle));

  long status = attempt.response.status;
  bool ok = status >= 200 && status < 300;
  if (std::find(request.answers.begin(), request.answers.end(), status) != request.answers.end()) return attempt;
  // Only error replies (and the few 200 replies that may hold an <Error>)
  // are XML to parse; a GET's 200 body is object data.
  std::optional<S3Error> s3 = ok && !request.error_in_ok_body ? std::nullopt : ParseError(attempt.response.body);
  if (ok && !(request.error_in_ok_body && s3)) return attempt;
  attempt.s3_code = s3 ? s3->code : "";
  std::string text = "HTTP " + std::to_string(status);
  // The server's words, escaped: they reach the terminal.
  if (s3 && !s3->code.empty()) text += " " + EscapedText(s3->code.substr(0, 256));
  if (s3 && !s3->message.empty()) text += ": " + EscapedText(s3->message.substr(0, 1024));
  if (status == 404 && !s3) text += " (not found)";
  // HEAD replies have no body, so no S3 code to hint from.
  if (status == 403 && !s3)
    text += " (forbidden: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (credentials from " +
            config_.credentials_source + ") and the bucket's permissions" +
            (encryption_.customer_key.empty() ? "" : "; or the object's SSE-C key is not --sse-c-key's") + ")";
  if (status == 400 && !s3 && request.method == "HEAD")
    text += encryption_.customer_key.empty()
                ? " (bad request: S3 describes an object encrypted with SSE-C only with its key, --sse-c-key)"
                : " (bad request: is the object encrypted with --sse-c-key's key?)";
  text += Hint(attempt.s3_code, config_);
  // 401/403: the endpoint refused our credentials (a wrong key or secret,
  // an expired token, a policy): an authentication failure (exit status 4).
  attempt.error = status == 401 || status == 403 ? Status::Unauthenticated(text) : Status::IoError(text);
  attempt.retryable = status >= 500 || status == 429 || RetryableCode(attempt.s3_code);
  return attempt;
}

Result<Response> Client::Send(const Request& request, const std::atomic<bool>* cancel) {
  thread_local std::minstd_rand rng(std::random_device{}());
  std::chrono::milliseconds wait = backoff_base_;
  unsigned attempts = 0;
  for (;;) {
    ++attempts;
    Attempt attempt = SendOnce(request, cancel);
    if (attempt.error.ok()) return std::move(attempt.response);
    std::string context = Uri(request.key) + ": " + request.what;
    if (attempt.error.code() == Status::Code::kCancelled) return attempt.error.WithContext(context);
    if (!attempt.retryable) return attempt.error.WithContext(context);
    if (attempts > retries_)
      return attempt.error.WithContext(context + ": gave up after " + std::to_string(attempts) + " attempts; last");
    // Full-ish jitter: sleep a random time in [wait/2, wait], in steps so
    // that cancellation is prompt.
    auto ms = wait.count() / 2 + static_cast<long>(rng() % static_cast<unsigned long>(wait.count() / 2 + 1));
    Clock::time_point until = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < until) {
      if (cancel && cancel->load()) return Status::Cancelled(context + ": cancelled");
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
    }
    wait = std::min(wait * 2, backoff_max_);
  }
}

Result<std::vector<std::string>> Client::ListKeys(const std::string& prefix) {
  Request r;
  r.method = "GET";
  r.query = {{"list-type", "2"}, {"prefix", prefix}};
  r.what = "ListObjectsV2 prefix '" + prefix + "'";
  VF_ASSIGN_OR_RETURN(Response response, Send(r));
  return XmlFields(response.body, "Key");
}

}  // namespace vramflow::s3
