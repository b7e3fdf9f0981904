// SPDX-License-Identifier: MIT
#include "transport/aws/sts.h"

#include <ctime>

#include "common/printable.h"
#include "transport/aws/xml.h"

namespace vramflow::s3 {
namespace {

std::string Form(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    if (!out.empty()) out += '&';
    out += FormEncode(k) + "=" + FormEncode(v);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> CommonFields(const std::string& action, const AssumeRoleParams& p) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"Action", action}, {"Version", "2011-06-15"}, {"RoleArn", p.role_arn}, {"RoleSessionName", p.session_name}};
  if (p.duration_seconds) f.emplace_back("DurationSeconds", std::to_string(p.duration_seconds));
  return f;
}

Result<std::string> HostOf(const std::string& url) {
  size_t sep = url.find("://");
  if (sep == std::string::npos) return Status::InvalidArgument("STS endpoint '" + url + "' needs http:// or https://");
  std::string host = url.substr(sep + 3);
  host = host.substr(0, host.find('/'));
  if (host.empty()) return Status::InvalidArgument("STS endpoint '" + url + "' has no host");
  return host;
}

std::string Root(const std::string& url) {
  std::string u = url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u + "/";
}

}  // namespace

Result<TimedCredentials> ParseStsReply(long status, const std::string& body, const std::string& what) {
  if (status < 200 || status >= 300) {
    std::optional<S3Error> e = ParseError(body);
    std::string text = what + ": HTTP " + std::to_string(status);
    // STS's words, escaped: they reach the terminal.
    if (e && !e->code.empty()) text += " " + EscapedText(e->code.substr(0, 256));
    if (e && !e->message.empty()) text += ": " + EscapedText(e->message.substr(0, 1024));
    return Status::IoError(text);
  }
  Result<XmlElement> parsed = ParseXml(body);
  if (!parsed.ok()) return parsed.status().WithContext(what);
  const XmlElement& doc = *parsed;
  const XmlElement* creds = doc.Find("Credentials");
  if (!creds) return Status::InvalidArgument(what + ": reply holds no <Credentials>");
  TimedCredentials out;
  auto text = [creds](const char* name) {
    const XmlElement* e = creds->Child(name);
    return e ? e->text : std::string();
  };
  out.credentials = {text("AccessKeyId"), text("SecretAccessKey"), text("SessionToken")};
  if (out.credentials.access_key.empty() || out.credentials.secret_key.empty())
    return Status::InvalidArgument(what + ": reply lacks AccessKeyId or SecretAccessKey");
  VF_RETURN_IF_ERROR(CheckCredentials(out.credentials, what));
  std::string expiration = text("Expiration");
  if (!expiration.empty()) {
    Result<std::time_t> t = ParseIso8601(expiration);
    if (!t.ok()) return t.status().WithContext(what);
    out.expiration = *t;
  }
  return out;
}

Result<TimedCredentials> AssumeRole(const StsEndpoint& sts, const Credentials& source, const AssumeRoleParams& params) {
  std::vector<std::pair<std::string, std::string>> fields = CommonFields("AssumeRole", params);
  if (!params.external_id.empty()) fields.emplace_back("ExternalId", params.external_id);
  HttpCall call;
  call.method = "POST";
  call.url = Root(sts.url);
  call.body = Form(fields);
  call.timeout = sts.timeout;
  call.trust = sts.trust;
  VF_ASSIGN_OR_RETURN(std::string host, HostOf(sts.url));
  std::string amz_date = AmzDate(std::time(nullptr));
  SignRequest sign{"POST", "/", {}, {}, Sha256Hex(call.body)};
  sign.headers = {
      {"content-type", "application/x-www-form-urlencoded; charset=utf-8"}, {"host", host}, {"x-amz-date", amz_date}};
  if (!source.session_token.empty()) sign.headers.emplace_back("x-amz-security-token", source.session_token);
  std::string authorization = Authorization(source, sts.region, amz_date, sign, "sts");
  // curl sends Host itself, from the URL: the same value.
  for (const auto& [k, v] : sign.headers)
    if (k != "host") call.headers.emplace_back(k, v);
  call.headers.emplace_back("Authorization", authorization);
  std::string what = "STS AssumeRole " + params.role_arn + " at " + sts.url;
  VF_ASSIGN_OR_RETURN(HttpReply reply, Http(call));
  return ParseStsReply(reply.status, reply.body, what);
}

Result<TimedCredentials> AssumeRoleWithWebIdentity(const StsEndpoint& sts, const std::string& token,
                                                   const AssumeRoleParams& params) {
  std::vector<std::pair<std::string, std::string>> fields = CommonFields("AssumeRoleWithWebIdentity", params);
  fields.emplace_back("WebIdentityToken", token);
  HttpCall call;
  call.method = "POST";
  call.url = Root(sts.url);
  call.body = Form(fields);
  call.timeout = sts.timeout;
  call.trust = sts.trust;
  call.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
  std::string what = "STS AssumeRoleWithWebIdentity " + params.role_arn + " at " + sts.url;
  VF_ASSIGN_OR_RETURN(HttpReply reply, Http(call));
  return ParseStsReply(reply.status, reply.body, what);
}

}  // namespace vramflow::s3
