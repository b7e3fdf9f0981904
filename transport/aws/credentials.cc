// SPDX-License-Identifier: MIT
#include "transport/aws/credentials.h"

#include <nlohmann/json.hpp>

#include <optional>

#include "common/printable.h"

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
  VF_RETURN_IF_ERROR(CheckCredentials(fetched->credentials, "credentials from " + source_));
  current_ = std::move(*fetched);
  return current_->credentials;
}

namespace {

// The number in text[at, at + n) when all of it is digits.
std::optional<int> Digits(std::string_view text, size_t at, size_t n) {
  if (at + n > text.size()) return std::nullopt;
  int value = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// Seconds east of UTC of a zone suffix ("", "Z", "+01:30", "-05:00"); none
// for anything else.
std::optional<long> ZoneOffset(std::string_view zone) {
  if (zone.empty() || zone == "Z") return 0;
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') return std::nullopt;
  std::optional<int> hours = Digits(zone, 1, 2), minutes = Digits(zone, 4, 2);
  if (!hours || !minutes || *hours > 23 || *minutes > 59) return std::nullopt;
  return (*hours * 3600L + *minutes * 60L) * (zone[0] == '+' ? 1 : -1);
}

}  // namespace

Result<std::time_t> ParseIso8601(std::string_view text) {
  const std::string shown = "expiration " + Printable(text, 64);
  // YYYY-MM-DDTHH:MM:SS, every field all digits.
  std::optional<int> y = Digits(text, 0, 4), mo = Digits(text, 5, 2), d = Digits(text, 8, 2), h = Digits(text, 11, 2),
                     mi = Digits(text, 14, 2), sec = Digits(text, 17, 2);
  if (!y || !mo || !d || !h || !mi || !sec || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || *mo < 1 || *mo > 12 || *d < 1 || *d > DaysInMonth(*y, *mo) || *h > 23 || *mi > 59 || *sec > 60)
    return Status::InvalidArgument(shown + " is not an ISO 8601 time (2026-01-31T12:00:00Z)");
  std::string_view rest = text.substr(19);
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == 1) return Status::InvalidArgument(shown + " has a '.' without digits");
    rest = rest.substr(i);
  }
  std::optional<long> offset = ZoneOffset(rest);
  if (!offset) return Status::InvalidArgument(shown + " has an unknown time zone");
  std::tm tm{};
  tm.tm_year = *y - 1900;
  tm.tm_mon = *mo - 1;
  tm.tm_mday = *d;
  tm.tm_hour = *h;
  tm.tm_min = *mi;
  tm.tm_sec = *sec;
  return timegm(&tm) - *offset;
}

std::string FormatIso8601(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

// Where `field` holds a byte outside [lowest, '~'], or it is too long: the
// error, naming the field and the offset, not the value.
Status CheckField(std::string_view field, const char* name, char lowest, const std::string& what) {
  if (field.size() > kMaxCredentialField)
    return Status::InvalidArgument(what + ": " + name + " is longer than " + std::to_string(kMaxCredentialField) +
                                   " bytes");
  for (size_t i = 0; i < field.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(field[i]);
    if (c < static_cast<unsigned char>(lowest) || c > '~')
      return Status::InvalidArgument(what + ": " + name + " holds a byte that is not printable ASCII" +
                                     (lowest == ' ' ? "" : " or is a space") + " (at offset " + std::to_string(i) +
                                     ")");
  }
  return Status::Ok();
}

}  // namespace

Status CheckCredentials(const Credentials& credentials, const std::string& what) {
  VF_RETURN_IF_ERROR(CheckField(credentials.access_key, "the access key", '!', what));
  VF_RETURN_IF_ERROR(CheckField(credentials.secret_key, "the secret key", ' ', what));
  return CheckField(credentials.session_token, "the session token", '!', what);
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
                                   (message.empty() ? "" : " (" + EscapedText(message.substr(0, 512)) + ")"));
  }
  VF_RETURN_IF_ERROR(CheckCredentials(out.credentials, what));
  std::string expiration = text("Expiration");
  if (!expiration.empty()) {
    Result<std::time_t> t = ParseIso8601(expiration);
    if (!t.ok()) return t.status().WithContext(what);
    out.expiration = *t;
  }
  return out;
}

}  // namespace vramflow::s3
