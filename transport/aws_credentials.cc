// SPDX-License-Identifier: MIT
#include "transport/aws_credentials.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace vramflow::s3 {

CredentialProvider::CredentialProvider(std::string source, CredentialFetch fetch, RefreshPolicy policy)
    : source_(std::move(source)), fetch_(std::move(fetch)), policy_(policy) {}

int CredentialProvider::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

Result<Credentials> CredentialProvider::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  std::time_t now = std::time(nullptr);
  bool fresh = current_ && (!current_->expiration || *current_->expiration - now > policy_.margin.count());
  if (fresh) return current_->credentials;
  bool still_valid = current_ && *current_->expiration > now;
  if (still_valid && now < next_try_) return current_->credentials;
  ++fetches_;
  Result<TimedCredentials> fetched = fetch_();
  if (!fetched.ok()) {
    next_try_ = now + policy_.retry_after.count();
    if (still_valid) return current_->credentials;
    return fetched.status().WithContext(current_ ? "refreshing expired credentials from " + source_
                                                 : "credentials from " + source_);
  }
  if (fetched->credentials.access_key.empty() || fetched->credentials.secret_key.empty())
    return Status::InvalidArgument("credentials from " + source_ + " lack an access key or secret");
  current_ = std::move(*fetched);
  return current_->credentials;
}

Result<std::time_t> ParseIso8601(std::string_view text) {
  std::string s(text);
  int y, mo, d, h, mi, sec;
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &consumed) != 6 ||
      mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return Status::InvalidArgument("expiration '" + s + "' is not an ISO 8601 time (2026-01-31T12:00:00Z)");
  std::string rest = s.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    rest = rest.substr(i);
  }
  long offset = 0;
  if (rest == "Z" || rest == "+00:00" || rest.empty()) {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    offset = (std::stol(rest.substr(1, 2)) * 3600 + std::stol(rest.substr(4, 2)) * 60) * (rest[0] == '+' ? 1 : -1);
  } else {
    return Status::InvalidArgument("expiration '" + s + "' has an unknown time zone");
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return timegm(&tm) - offset;
}

std::string FormatIso8601(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<TimedCredentials> ParseCredentialJson(std::string_view json, const std::string& what) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument(what + ": reply is not a JSON object");
  auto text = [&doc](const char* key) -> std::string {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
  };
  TimedCredentials out;
  out.credentials.access_key = text("AccessKeyId");
  out.credentials.secret_key = text("SecretAccessKey");
  out.credentials.session_token = text("SessionToken");
  if (out.credentials.session_token.empty()) out.credentials.session_token = text("Token");
  if (out.credentials.access_key.empty() || out.credentials.secret_key.empty()) {
    std::string message = text("Message");
    return Status::InvalidArgument(what + ": no AccessKeyId/SecretAccessKey in the reply" +
                                   (message.empty() ? "" : " (" + message + ")"));
  }
  std::string expiration = text("Expiration");
  if (!expiration.empty()) {
    Result<std::time_t> t = ParseIso8601(expiration);
    if (!t.ok()) return t.status().WithContext(what);
    out.expiration = *t;
  }
  return out;
}

}  // namespace vramflow::s3
