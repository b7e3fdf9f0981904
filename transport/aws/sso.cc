// SPDX-License-Identifier: MIT
#include "transport/aws/sso.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "common/printable.h"
#include "common/unique_fd.h"

namespace vramflow::s3 {
namespace {

constexpr size_t kMaxCacheFile = 64 * 1024;

std::string Text(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
}

// Less than this left on a cached token and it is renewed first (the aws
// CLI's refresh window).
constexpr std::time_t kRefreshWindowSeconds = 15 * 60;

// The cache file's JSON, bounded in size.
Result<nlohmann::json> ReadCache(const std::string& path, const std::string& missing) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(missing);
  std::string text(kMaxCacheFile + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxCacheFile) return Status::InvalidArgument(path + ": larger than 64 KiB");
  nlohmann::json cache = nlohmann::json::parse(text, nullptr, false);
  if (cache.is_discarded() || !cache.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  return cache;
}

// A time the CLI wrote: "2026-01-01T00:00:00Z" (older versions "...UTC").
Result<std::time_t> CacheTime(std::string text) {
  if (text.size() > 3 && text.compare(text.size() - 3, 3, "UTC") == 0) text = text.substr(0, text.size() - 3) + "Z";
  return ParseIso8601(text);
}

// `text` as the file `path`, complete or not at all: written beside it,
// readable by its owner only (it holds the refresh token), then renamed.
Status ReplaceFile(const std::string& path, const std::string& text) {
  std::string temp = path + ".vramflow-XXXXXX";
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));  // mode 0600
  if (!fd.valid()) return Status::FromErrno("creating '" + temp + "'", errno);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      ::unlink(temp.c_str());
      return Status::FromErrno("writing '" + temp + "'", e);
    }
    done += static_cast<size_t>(n);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(temp.c_str());
    return Status::FromErrno("renaming '" + temp + "' to '" + path + "'", e);
  }
  return Status::Ok();
}

// Serializes the renewals of vramflow processes that share a cache: an
// exclusive flock(2) on the cache directory, whose inode stays while the
// files in it are replaced. Taken before a renewal and held until the new
// cache is written, so that a second process waits, finds the renewed token
// and sends no refresh token of its own (the first one's renewal spends
// it). Waits at most `wait`; where the lock cannot be had (a file system
// without locks, a holder past the wait) renewal goes on without it, as
// the aws CLI renews (it takes no lock).
class RenewalLock {
 public:
  RenewalLock(const std::string& dir, std::chrono::milliseconds wait)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (!fd_.valid()) return;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  bool held() const { return held_; }  // released when the descriptor closes

 private:
  UniqueFd fd_;
  bool held_ = false;
};

// The token in `cache` when it is not `token` and has more than `min_left`
// seconds left: another process renewed it.
std::optional<std::pair<std::string, std::time_t>> RenewedByAnother(const nlohmann::json& cache,
                                                                    const std::string& token, std::time_t min_left) {
  const std::string theirs = Text(cache, "accessToken");
  if (theirs.empty() || theirs == token) return std::nullopt;
  Result<std::time_t> expires = CacheTime(Text(cache, "expiresAt"));
  if (!expires.ok() || *expires - std::time(nullptr) <= min_left) return std::nullopt;
  return std::make_pair(theirs, *expires);
}

struct RenewedToken {
  std::string access_token;
  std::time_t expires = 0;
  std::string cache_text;  // the cache file's new contents
};

// The CLI's refresh: OIDC CreateToken with the refresh token and the client
// registration cached beside the access token (all four must be there and
// the registration unexpired). The new cache holds the fields the CLI
// writes, in its order.
Result<RenewedToken> RefreshToken(const SsoProfile& sso, const nlohmann::json& cache) {
  std::string refresh = Text(cache, "refreshToken"), client_id = Text(cache, "clientId"),
              client_secret = Text(cache, "clientSecret"), registration = Text(cache, "registrationExpiresAt");
  if (refresh.empty() || client_id.empty() || client_secret.empty() || registration.empty())
    return Status::InvalidArgument("the cache holds no refresh token and client registration");
  VF_ASSIGN_OR_RETURN(std::time_t registration_expires, CacheTime(registration));
  if (registration_expires <= std::time(nullptr))
    return Status::InvalidArgument("its client registration expired at " + FormatIso8601(registration_expires));
  std::string oidc = sso.oidc_url.empty() ? "https://oidc." + sso.region + ".amazonaws.com" : sso.oidc_url;
  while (!oidc.empty() && oidc.back() == '/') oidc.pop_back();
  HttpCall call;
  call.method = "POST";
  call.url = oidc + "/token";
  call.headers = {{"Content-Type", "application/json"}};
  call.body = nlohmann::json{
      {"grantType", "refresh_token"},
      {"clientId", client_id},
      {"clientSecret", client_secret},
      {"refreshToken",
       refresh}}.dump();
  call.timeout = sso.timeout;
  call.trust = sso.trust;
  const std::string what = "SSO OIDC CreateToken at " + oidc;
  VF_ASSIGN_OR_RETURN(HttpReply reply, Http(call));
  nlohmann::json doc = nlohmann::json::parse(reply.body, nullptr, false);
  if (reply.status != 200) {
    std::string error = doc.is_object() ? Text(doc, "error") : "";
    return Status::IoError(what + ": HTTP " + std::to_string(reply.status) +
                           (error.empty() ? "" : " " + EscapedText(error.substr(0, 256))));
  }
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument(what + ": reply is not a JSON object");
  std::string token = Text(doc, "accessToken");
  auto expires_in = doc.find("expiresIn");
  if (token.empty() || expires_in == doc.end() || !expires_in->is_number_integer() || expires_in->get<int64_t>() <= 0 ||
      expires_in->get<int64_t>() > int64_t{366} * 24 * 3600)
    return Status::InvalidArgument(what + ": reply lacks accessToken or a valid expiresIn");
  RenewedToken renewed;
  renewed.access_token = token;
  renewed.expires = std::time(nullptr) + static_cast<std::time_t>(expires_in->get<int64_t>());
  // A reply without a new refresh token leaves the old one in force.
  std::string next_refresh = Text(doc, "refreshToken");
  renewed.cache_text =
      nlohmann::ordered_json{
          {"startUrl", sso.start_url},
          {"region", sso.region},
          {"accessToken", token},
          {"expiresAt", FormatIso8601(renewed.expires)},
          {"clientId", client_id},
          {"clientSecret", client_secret},
          {"registrationExpiresAt", registration},
          {"refreshToken", next_refresh.empty() ? refresh : next_refresh},
      }
          .dump();
  return renewed;
}

}  // namespace

std::string SsoCacheFileName(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), digest, &len, EVP_sha1(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out + ".json";
}

Result<TimedCredentials> FetchSsoCredentials(const SsoProfile& sso) {
  std::string login = "run `aws sso login --profile " + sso.profile + "`";
  std::string path = sso.cache_dir + "/" + SsoCacheFileName(sso.session.empty() ? sso.start_url : sso.session);
  VF_ASSIGN_OR_RETURN(nlohmann::json cache,
                      ReadCache(path, "SSO profile '" + sso.profile + "': no cached token " + path + ": " + login));
  std::string token = Text(cache, "accessToken");
  std::string expires_at = Text(cache, "expiresAt");
  if (token.empty() || expires_at.empty())
    return Status::InvalidArgument(path + ": no accessToken / expiresAt: " + login);
  VF_ASSIGN_OR_RETURN(std::time_t expires, CacheTime(expires_at));
  // Only profiles with an sso_session are renewed, as by the CLI (a legacy
  // profile's login caches no refresh token).
  std::string not_renewed;
  if (!sso.session.empty() && expires - std::time(nullptr) < kRefreshWindowSeconds) {
    const RenewalLock lock(sso.cache_dir, 2 * sso.timeout);
    // Another vramflow may have renewed it while this one waited: the cache
    // is read again, now that no renewal is under way.
    std::optional<std::pair<std::string, std::time_t>> theirs;
    if (lock.held()) {
      VF_ASSIGN_OR_RETURN(cache, ReadCache(path, path + ": gone during renewal: " + login));
      theirs = RenewedByAnother(cache, token, kRefreshWindowSeconds);
    }
    if (theirs) {
      std::tie(token, expires) = *theirs;
    } else if (Result<RenewedToken> renewed = RefreshToken(sso, cache); renewed.ok()) {
      token = renewed->access_token;
      expires = renewed->expires;
      // The renewed token serves this run even where the cache cannot be
      // written (a read-only ~/.aws); the CLI then renews it again itself.
      (void)ReplaceFile(path, renewed->cache_text);
    } else {
      not_renewed = "; renewing it failed: " + renewed.status().message();
      // Another process (the aws CLI, which takes no lock) may have renewed
      // it first with the same refresh token, which then no longer works:
      // its token is in the cache by now.
      Result<nlohmann::json> again = ReadCache(path, path + ": gone");
      if (auto by_another = again.ok() ? RenewedByAnother(*again, token, 0) : std::nullopt)
        std::tie(token, expires) = *by_another;
    }
  }
  if (expires <= std::time(nullptr))
    return Status::InvalidArgument("SSO profile '" + sso.profile + "': the cached token expired at " +
                                   FormatIso8601(expires) + not_renewed + ": " + login);
  HttpCall call;
  std::string portal = sso.portal_url.empty() ? "https://portal.sso." + sso.region + ".amazonaws.com" : sso.portal_url;
  while (!portal.empty() && portal.back() == '/') portal.pop_back();
  call.url = portal + "/federation/credentials?role_name=" + FormEncode(sso.role_name) +
             "&account_id=" + FormEncode(sso.account_id);
  call.headers = {{"x-amz-sso_bearer_token", token}};
  call.timeout = sso.timeout;
  call.trust = sso.trust;
  std::string what = "SSO GetRoleCredentials " + sso.role_name + "@" + sso.account_id + " at " + portal;
  VF_ASSIGN_OR_RETURN(HttpReply reply, Http(call));
  if (reply.status != 200)
    return Status::IoError(what + ": HTTP " + std::to_string(reply.status) +
                           (reply.status == 401 || reply.status == 403 ? " (" + login + ")" : ""));
  nlohmann::json doc = nlohmann::json::parse(reply.body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("roleCredentials") || !doc["roleCredentials"].is_object())
    return Status::InvalidArgument(what + ": reply holds no roleCredentials");
  const nlohmann::json& rc = doc["roleCredentials"];
  TimedCredentials out;
  out.credentials = {Text(rc, "accessKeyId"), Text(rc, "secretAccessKey"), Text(rc, "sessionToken")};
  if (out.credentials.access_key.empty() || out.credentials.secret_key.empty())
    return Status::InvalidArgument(what + ": reply lacks accessKeyId or secretAccessKey");
  // Milliseconds since 1970: an integer, at most the year 9999 (not a float
  // whose conversion would overflow).
  auto expiration = rc.find("expiration");
  if (expiration != rc.end() && !expiration->is_null()) {
    constexpr int64_t kMaxMilliseconds = int64_t{253402300799} * 1000;
    const bool in_range = expiration->is_number_unsigned()
                              ? expiration->get<uint64_t>() <= static_cast<uint64_t>(kMaxMilliseconds)
                              : expiration->is_number_integer() && expiration->get<int64_t>() >= 0 &&
                                    expiration->get<int64_t>() <= kMaxMilliseconds;
    if (!in_range) return Status::InvalidArgument(what + ": reply's expiration is not milliseconds since 1970");
    out.expiration = static_cast<std::time_t>(expiration->get<int64_t>() / 1000);
  }
  return out;
}

}  // namespace vramflow::s3
