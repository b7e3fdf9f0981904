// SPDX-License-Identifier: MIT
#include "transport/aws_sso.h"

#include <openssl/evp.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vramflow::s3 {
namespace {

constexpr size_t kMaxCacheFile = 64 * 1024;

std::string Text(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("SSO profile '" + sso.profile + "': no cached token " + path + ": " + login);
  std::string text(kMaxCacheFile + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxCacheFile) return Status::InvalidArgument(path + ": larger than 64 KiB");
  nlohmann::json cache = nlohmann::json::parse(text, nullptr, false);
  if (cache.is_discarded() || !cache.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  std::string token = Text(cache, "accessToken");
  std::string expires_at = Text(cache, "expiresAt");
  if (token.empty() || expires_at.empty())
    return Status::InvalidArgument(path + ": no accessToken / expiresAt: " + login);
  // The CLI writes "2026-01-01T00:00:00Z" (older versions "...UTC").
  if (expires_at.size() > 3 && expires_at.compare(expires_at.size() - 3, 3, "UTC") == 0)
    expires_at = expires_at.substr(0, expires_at.size() - 3) + "Z";
  VF_ASSIGN_OR_RETURN(std::time_t expires, ParseIso8601(expires_at));
  if (expires <= std::time(nullptr))
    return Status::InvalidArgument("SSO profile '" + sso.profile + "': the cached token expired at " +
                                   FormatIso8601(expires) + ": " + login);
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
  auto expiration = rc.find("expiration");
  if (expiration != rc.end() && expiration->is_number()) out.expiration = expiration->get<int64_t>() / 1000;
  return out;
}

}  // namespace vramflow::s3
