// SPDX-License-Identifier: MIT
#include "transport/aws/metadata.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/printable.h"
#include "transport/aws/http.h"

namespace vramflow::s3 {
namespace {

std::string HostOfUrl(const std::string& url) {
  size_t sep = url.find("://");
  std::string rest = sep == std::string::npos ? url : url.substr(sep + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest[0] == '[') return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.find(':'));
}

bool IsLoopback(const std::string& host) {
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// An IAM role name as IAM allows it (1 to 64 of A-Z a-z 0-9 + = , . @ _ -):
// it goes into a URL and into messages.
bool IsRoleName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && std::string_view("+=,.@_-").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  return true;
}

// An IMDSv2 token goes into a header: printable ASCII without spaces.
bool IsHeaderToken(const std::string& token) {
  return std::all_of(token.begin(), token.end(), [](unsigned char c) { return c > ' ' && c <= '~'; });
}

}  // namespace

Status CheckContainerFullUri(const std::string& url) {
  if (url.rfind("https://", 0) == 0) return Status::Ok();
  if (url.rfind("http://", 0) != 0)
    return Status::InvalidArgument("AWS_CONTAINER_CREDENTIALS_FULL_URI '" + url + "' must be http:// or https://");
  std::string host = HostOfUrl(url);
  if (host == "localhost" || host == "169.254.170.2" || host == "169.254.170.23" || host == "fd00:ec2::23" ||
      IsLoopback(host))
    return Status::Ok();
  return Status::InvalidArgument("AWS_CONTAINER_CREDENTIALS_FULL_URI '" + url +
                                 "': plain http is allowed only to a loopback address or the ECS/EKS hosts "
                                 "169.254.170.2, 169.254.170.23, fd00:ec2::23 (use https)");
}

Result<TimedCredentials> FetchContainerCredentials(const ContainerEndpoint& endpoint) {
  HttpCall call;
  call.url = endpoint.url;
  call.timeout = endpoint.timeout;
  call.trust = endpoint.trust;
  std::string token = endpoint.token;
  if (!endpoint.token_file.empty()) {
    std::ifstream in(endpoint.token_file);
    if (!in) return Status::IoError("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + endpoint.token_file + ": cannot read");
    std::ostringstream text;
    text << in.rdbuf();
    token = Trim(text.str());
    if (token.size() > 16 * 1024)
      return Status::InvalidArgument("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + endpoint.token_file + ": too large");
  }
  if (token.find_first_of("\r\n") != std::string::npos)
    return Status::InvalidArgument("the container authorization token holds a line break");
  if (!token.empty()) call.headers.emplace_back("Authorization", token);
  std::string what = "container credentials endpoint " + endpoint.url;
  VF_ASSIGN_OR_RETURN(HttpReply reply, Http(call));
  if (reply.status != 200)
    return Status::IoError(what + ": HTTP " + std::to_string(reply.status) + " " +
                           EscapedText(reply.body.substr(0, 200)));
  return ParseCredentialJson(reply.body, what);
}

namespace {

// `call` tried up to `attempts` times, until it gets a 200 with a body; else
// the last reply, or the last transport failure.
Result<HttpReply> GetWithAttempts(const HttpCall& call, unsigned attempts) {
  Result<HttpReply> reply = Status::Internal("no attempt");
  for (unsigned i = 0; i < std::max(1u, attempts); ++i) {
    reply = Http(call);
    if (reply.ok() && reply->status == 200 && !reply->body.empty()) break;
  }
  return reply;
}

}  // namespace

Result<TimedCredentials> FetchImdsCredentials(const ImdsEndpoint& endpoint) {
  std::string base = endpoint.base;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string what = "instance metadata " + base;
  HttpCall put;
  put.method = "PUT";
  put.url = base + "/latest/api/token";
  put.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}};
  put.timeout = endpoint.timeout;
  // IMDSv2's token; where there is none, why (for IMDSv1, or the error).
  std::string token, no_token;
  for (unsigned i = 0; i < std::max(1u, endpoint.attempts); ++i) {
    Result<HttpReply> reply = Http(put);
    if (!reply.ok()) {  // no reply: retried, then IMDSv1 (a hop limit drops the reply)
      no_token = reply.status().message();
      continue;
    }
    const long status = reply->status;
    if (status == 200) {
      token = Trim(reply->body);
      if (!IsHeaderToken(token))
        return Status::InvalidArgument(what +
                                       ": PUT /latest/api/token: the token holds a byte that is not printable "
                                       "ASCII or is a space");
      no_token = token.empty() ? "an empty token" : "";
      break;
    }
    no_token = "HTTP " + std::to_string(status);
    if (status == 400) return Status::IoError(what + ": PUT /latest/api/token: HTTP 400 (request refused)");
    if (status == 403 || status == 404 || status == 405) break;  // no IMDSv2 here
  }
  if (token.empty() && endpoint.v1_disabled)
    return Status::IoError(what + ": no IMDSv2 token (PUT /latest/api/token: " + no_token +
                           "), and IMDSv1 is disabled (AWS_EC2_METADATA_V1_DISABLED / ec2_metadata_v1_disabled)");
  const std::string version = token.empty() ? " (IMDSv1: no token, " + no_token + ")" : "";
  HttpCall get;
  get.url = base + "/latest/meta-data/iam/security-credentials/";
  if (!token.empty()) get.headers.emplace_back("X-aws-ec2-metadata-token", token);
  get.timeout = endpoint.timeout;
  Result<HttpReply> role = GetWithAttempts(get, endpoint.attempts);
  if (!role.ok()) return Status::IoError(role.status().message() + version);
  if (role->status == 404) return Status::IoError(what + ": no IAM role attached to this instance");
  if (role->status != 200)
    return Status::IoError(what + ": GET the role name: HTTP " + std::to_string(role->status) + version);
  std::string name = Trim(role->body.substr(0, role->body.find('\n')));
  if (!IsRoleName(name))
    return Status::InvalidArgument(what + ": role name " + Printable(name, 100) +
                                   " is not an IAM role name (1 to 64 of A-Z a-z 0-9 + = , . @ _ -)");
  get.url += name;
  Result<HttpReply> creds = GetWithAttempts(get, endpoint.attempts);
  if (!creds.ok()) return Status::IoError(creds.status().message() + version);
  if (creds->status != 200)
    return Status::IoError(what + ": GET credentials of role " + name + ": HTTP " + std::to_string(creds->status) +
                           version);
  return ParseCredentialJson(creds->body, what + " role " + name);
}

}  // namespace vramflow::s3
