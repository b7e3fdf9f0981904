// SPDX-License-Identifier: MIT
#include "transport/aws/http.h"

#include <cctype>
#include <memory>

#include "transport/aws/curl_library.h"

namespace vramflow::s3 {
namespace {

struct Sink {
  std::string* body;
  size_t max;
  bool overflow = false;
};

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  if (s->body->size() + size * n > s->max) {
    s->overflow = true;
    return 0;  // aborts the transfer
  }
  s->body->append(data, size * n);
  return size * n;
}

}  // namespace

void ApplyTlsTrust(void* curl_handle, const TlsTrust& trust) {
  CURL* h = static_cast<CURL*>(curl_handle);
  const CurlApi& curl = OpenedCurl();
  if (!trust.ca_file.empty()) curl.easy_setopt(h, CURLOPT_CAINFO, trust.ca_file.c_str());
  if (!trust.ca_dir.empty()) curl.easy_setopt(h, CURLOPT_CAPATH, trust.ca_dir.c_str());
}

std::string CertificateHint(const TlsTrust& trust) {
  if (trust.ca_file.empty() && trust.ca_dir.empty())
    return " (the server's certificate does not chain to a CA in the system's store: for a private CA pass "
           "--ca-bundle FILE or set AWS_CA_BUNDLE)";
  std::string hint = " (the server's certificate does not chain to a CA in " +
                     (trust.ca_file.empty() ? trust.ca_dir : trust.ca_file) + ", from " + trust.source;
  if (trust.source.rfind("SSL_CERT_", 0) == 0) hint += ": for a private CA pass --ca-bundle FILE or set AWS_CA_BUNDLE";
  return hint + ")";
}

std::string FormEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Result<HttpReply> Http(const HttpCall& call) {
  VF_ASSIGN_OR_RETURN(const CurlApi* curl, OpenCurl());
  CurlEasyHandle handle(curl->easy_init());
  if (!handle) return Status::Internal("curl_easy_init failed");
  CURL* h = handle.get();
  CurlList headers;
  for (const auto& [k, v] : call.headers) {
    if (v.find_first_of("\r\n") != std::string::npos)
      return Status::InvalidArgument("header " + k + " for " + call.url + " holds a line break");
    curl_slist* l = curl->slist_append(headers.get(), (k + ": " + v).c_str());
    if (!l) return Status::Internal("curl_slist_append failed");
    headers.release();
    headers.reset(l);
  }
  HttpReply reply;
  Sink sink{&reply.body, call.max_reply};
  curl->easy_setopt(h, CURLOPT_URL, call.url.c_str());
  curl->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl->easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(call.timeout.count()));
  curl->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(call.timeout.count()));
  curl->easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl->easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl->easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  ApplyTlsTrust(h, call.trust);
  if (call.method == "POST" || call.method == "PUT") {
    curl->easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    curl->easy_setopt(h, CURLOPT_POSTFIELDS, call.body.c_str());
    curl->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
  } else if (call.method != "GET") {
    curl->easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  }
  CURLcode rc = curl->easy_perform(h);
  std::string where = call.method + " " + call.url.substr(0, call.url.find('?'));
  if (sink.overflow) return Status::IoError(where + ": reply larger than " + std::to_string(call.max_reply) + " bytes");
  if (rc != CURLE_OK) {
    std::string text = where + ": " + curl->easy_strerror(rc);
    if (rc == CURLE_PEER_FAILED_VERIFICATION) text += CertificateHint(call.trust);
    return (rc == CURLE_OPERATION_TIMEDOUT ? Status::TimedOut : Status::IoError)(text);
  }
  curl->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace vramflow::s3
