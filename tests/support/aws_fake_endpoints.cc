// SPDX-License-Identifier: MIT
#include "tests/support/aws_fake_endpoints.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

#include "transport/aws/credentials.h"
#include "transport/aws/sigv4.h"

namespace vramflow::testing {
namespace {

// The hex after "Signature=" in an Authorization header (clients separate
// its parts with "," or ", ").
std::string SignatureOf(const std::string& authorization) {
  size_t at = authorization.find("Signature=");
  return at == std::string::npos ? "" : authorization.substr(at + 10, 64);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string FormDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> ParseForm(const std::string& body) {
  std::map<std::string, std::string> form;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t amp = body.find('&', pos);
    std::string kv = body.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    size_t eq = kv.find('=');
    form[FormDecode(kv.substr(0, eq))] = eq == std::string::npos ? "" : FormDecode(kv.substr(eq + 1));
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return form;
}

std::string StsError(const std::string& code, const std::string& message) {
  return "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>" + code +
         "</Code><Message>" + message + "</Message></Error><RequestId>r</RequestId></ErrorResponse>";
}

}  // namespace

struct FakeAws::Request {
  std::string method, path;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

FakeAws::FakeAws(FakeS3* s3, int lifetime_seconds) : s3_(s3), lifetime_(lifetime_seconds) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeAws::~FakeAws() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
  ::close(listen_fd_);
}

void FakeAws::AllowSource(const std::string& access_key, const std::string& secret_key, const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  source_key_ = access_key;
  source_secret_ = secret_key;
  source_token_ = token;
}

void FakeAws::SetWebIdentityToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  web_identity_token_ = token;
}

void FakeAws::SetContainerToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  container_token_ = token;
}

void FakeAws::SetSsoToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  sso_token_ = token;
}

void FakeAws::SetSsoRefresh(const std::string& client_id, const std::string& client_secret,
                            const std::string& refresh_token, const std::string& access_token, int expires_in,
                            const std::string& next_refresh) {
  std::lock_guard<std::mutex> lock(mu_);
  sso_refresh_ = {client_id, client_secret, refresh_token, access_token, next_refresh, expires_in};
}

void FakeAws::OnOidcRequest(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  oidc_hook_ = std::move(hook);
}

std::string FakeAws::LastOidcBody() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_oidc_body_;
}

void FakeAws::SetLifetime(int seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  lifetime_ = seconds;
}

void FakeAws::FailNext(const std::string& route, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_[route] = times;
}

void FakeAws::DropNext(const std::string& route, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  drops_[route] = times;
}

void FakeAws::SetImdsV1(bool allowed) {
  std::lock_guard<std::mutex> lock(mu_);
  imds_v1_ = allowed;
}

void FakeAws::AnswerNext(const std::string& route, int status, const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  canned_[route].emplace_back(status, body);
}

int FakeAws::Count(const std::string& route) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(route);
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::string, std::string> FakeAws::LastStsForm() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_form_;
}

std::vector<std::string> FakeAws::Issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return issued_;
}

void FakeAws::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    connections_.emplace_back([this, fd] { Serve(fd); });
  }
}

// One request per connection ("Connection: close"), read with a 5 s limit.
void FakeAws::Serve(int fd) {
  std::string in;
  char buf[16 * 1024];
  auto read_more = [&]() {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return false;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t end;
  while ((end = in.find("\r\n\r\n")) == std::string::npos)
    if (!read_more() || in.size() > (1 << 20)) return (void)::close(fd);
  Request r;
  std::string head = in.substr(0, end);
  in.erase(0, end + 4);
  size_t line_end = head.find("\r\n");
  std::string line = head.substr(0, line_end);
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  r.method = line.substr(0, sp1);
  r.path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string h = head.substr(pos, e - pos);
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      size_t v = h.find_first_not_of(' ', colon + 1);
      r.headers[Lower(h.substr(0, colon))] = v == std::string::npos ? "" : h.substr(v);
    }
    pos = e + 2;
  }
  size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
  while (in.size() < length)
    if (!read_more()) return (void)::close(fd);
  r.body = in.substr(0, length);
  Reply reply = Handle(r);
  if (reply.dropped) return (void)::close(fd);
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) +
                    " X\r\nContent-Length: " + std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n" +
                    reply.body;
  size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::close(fd);
}

FakeAws::Issue FakeAws::NewCredentials() {
  ++serial_;
  Issue i{"ASIAFAKE" + std::to_string(serial_), "secret-" + std::to_string(serial_) + "-" + std::to_string(port_),
          "token-" + std::to_string(serial_) + "-" + std::to_string(std::time(nullptr)),
          std::time(nullptr) + lifetime_};
  issued_.push_back(i.key);
  issued_keys_[i.key] = {i.secret, i.token};
  if (s3_) s3_->AddKey(i.key, i.secret, i.token, i.expires);
  return i;
}

// The AssumeRole request's signature, recomputed with the allowed source key.
std::string FakeAws::CheckStsSignature(const Request& r) const {
  std::string auth = r.Header("authorization");
  const std::string prefix = "AWS4-HMAC-SHA256 Credential=";
  if (auth.rfind(prefix, 0) != 0) return "MissingAuthenticationToken";
  size_t slash = auth.find('/', prefix.size());
  std::string access_key = auth.substr(prefix.size(), slash - prefix.size());
  std::string secret, token;
  if (access_key == source_key_) {
    secret = source_secret_;
    token = source_token_;
  } else if (auto it = issued_keys_.find(access_key); it != issued_keys_.end()) {
    secret = it->second.first;
    token = it->second.second;
  } else {
    return "InvalidClientTokenId";
  }
  std::string scope = auth.substr(slash + 1, auth.find(',') - slash - 1);
  size_t r1 = scope.find('/'), r2 = scope.find('/', r1 + 1);
  std::string region = scope.substr(r1 + 1, r2 - r1 - 1);
  if (scope.substr(r2 + 1, 4) != "sts/") return "SignatureDoesNotMatch";
  size_t at = auth.find("SignedHeaders=");
  std::string signed_headers = auth.substr(at + 14, auth.find(',', at) - at - 14);
  std::string signature = SignatureOf(auth);
  s3::SignRequest sign{r.method, r.path, {}, {}, s3::Sha256Hex(r.body)};
  size_t pos = 0;
  while (pos <= signed_headers.size()) {
    size_t semi = signed_headers.find(';', pos);
    std::string name = signed_headers.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    sign.headers.emplace_back(name, r.Header(name));
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  s3::Credentials source{access_key, secret, ""};
  if (SignatureOf(s3::Authorization(source, region, r.Header("x-amz-date"), sign, "sts")) != signature)
    return "SignatureDoesNotMatch";
  if (r.Header("x-amz-security-token") != token ||
      (!token.empty() && signed_headers.find("x-amz-security-token") == std::string::npos))
    return "InvalidClientTokenId";
  return "";
}

namespace {

// The route of a request, as Count names it; "Other" for none.
std::string RouteOf(const std::string& method, const std::string& path, const std::string& body) {
  const std::string creds_path = "/latest/meta-data/iam/security-credentials/";
  if (method == "POST" && path == "/") return ParseForm(body)["Action"];
  if (method == "GET" && path == "/container/creds") return "Container";
  if (method == "GET" && path.rfind("/federation/credentials?", 0) == 0) return "Sso";
  if (method == "POST" && path == "/token") return "OidcToken";
  if (method == "PUT" && path == "/latest/api/token") return "ImdsToken";
  if (method == "GET" && path.rfind(creds_path, 0) == 0) return path == creds_path ? "ImdsRole" : "ImdsCredentials";
  return "Other";
}

}  // namespace

FakeAws::Reply FakeAws::Handle(const Request& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string route = RouteOf(r.method, r.path, r.body);
  auto canned = canned_.find(route);
  if (canned == canned_.end() || canned->second.empty()) return Route(r);
  ++counts_[route];
  Reply reply{canned->second.front().first, canned->second.front().second};
  canned->second.erase(canned->second.begin());
  return reply;
}

FakeAws::Reply FakeAws::Route(const Request& r) {
  auto json = [](const Issue& i, const char* token_name) {
    return std::string("{\"Code\":\"Success\",\"AccessKeyId\":\"") + i.key + "\",\"SecretAccessKey\":\"" + i.secret +
           "\",\"" + token_name + "\":\"" + i.token + "\",\"Expiration\":\"" + s3::FormatIso8601(i.expires) + "\"}";
  };
  if (r.method == "POST" && r.path == "/") {
    std::map<std::string, std::string> form = ParseForm(r.body);
    std::string action = form["Action"];
    ++counts_[action];
    last_form_ = form;
    if (failures_[action] > 0) {
      --failures_[action];
      return {503, StsError("ServiceUnavailable", "injected")};
    }
    if (form["Version"] != "2011-06-15" || form["RoleArn"].empty() || form["RoleSessionName"].empty())
      return {400, StsError("InvalidParameterValue", "RoleArn, RoleSessionName and Version are required")};
    if (action == "AssumeRole") {
      if (std::string refused = CheckStsSignature(r); !refused.empty())
        return {403, StsError(refused, "refused by the fake STS")};
    } else if (action == "AssumeRoleWithWebIdentity") {
      if (form["WebIdentityToken"].empty() || form["WebIdentityToken"] != web_identity_token_)
        return {400, StsError("InvalidIdentityToken", "the web identity token is not the one expected")};
    } else {
      return {400, StsError("InvalidAction", "unknown action " + action)};
    }
    Issue i = NewCredentials();
    return {200, "<" + action + "Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><" + action +
                     "Result><Credentials><AccessKeyId>" + i.key + "</AccessKeyId><SecretAccessKey>" + i.secret +
                     "</SecretAccessKey><SessionToken>" + i.token + "</SessionToken><Expiration>" +
                     s3::FormatIso8601(i.expires) + "</Expiration></Credentials></" + action + "Result></" + action +
                     "Response>"};
  }
  if (r.method == "GET" && r.path == "/container/creds") {
    ++counts_["Container"];
    if (!container_token_.empty() && r.Header("authorization") != container_token_)
      return {403, "{\"code\":\"AccessDenied\",\"message\":\"bad authorization token\"}"};
    return {200, json(NewCredentials(), "Token")};
  }
  const std::string sso_path = "/federation/credentials?";
  if (r.method == "GET" && r.path.rfind(sso_path, 0) == 0) {
    ++counts_["Sso"];
    last_form_ = ParseForm(r.path.substr(sso_path.size()));
    if (sso_token_.empty() || r.Header("x-amz-sso_bearer_token") != sso_token_)
      return {401, "{\"message\":\"Session token not found or invalid\"}"};
    Issue i = NewCredentials();
    return {200, "{\"roleCredentials\":{\"accessKeyId\":\"" + i.key + "\",\"secretAccessKey\":\"" + i.secret +
                     "\",\"sessionToken\":\"" + i.token + "\",\"expiration\":" + std::to_string(i.expires * 1000LL) +
                     "}}"};
  }
  if (r.method == "POST" && r.path == "/token") {
    ++counts_["OidcToken"];
    last_oidc_body_ = r.body;
    if (oidc_hook_) oidc_hook_();
    // OAuth errors as SSO OIDC returns them: {"error": "...", "error_description": "..."}.
    auto oauth_error = [](int status, const char* error) {
      return Reply{status, std::string("{\"error\":\"") + error + "\",\"error_description\":\"refused by the fake\"}"};
    };
    if (failures_["OidcToken"] > 0) {
      --failures_["OidcToken"];
      return oauth_error(500, "internal_server_error");
    }
    nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
    if (r.Header("content-type") != "application/json" || !doc.is_object()) return oauth_error(400, "invalid_request");
    auto text = [&doc](const char* key) {
      auto it = doc.find(key);
      return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const SsoRefresh& want = sso_refresh_;
    if (text("grantType") != "refresh_token") return oauth_error(400, "unsupported_grant_type");
    if (want.client_id.empty() || text("clientId") != want.client_id || text("clientSecret") != want.client_secret)
      return oauth_error(401, "invalid_client");
    if (text("refreshToken") != want.refresh_token) return oauth_error(400, "invalid_grant");
    sso_token_ = want.access_token;
    nlohmann::json reply = {
        {"accessToken", want.access_token}, {"expiresIn", want.expires_in}, {"tokenType", "Bearer"}};
    if (!want.next_refresh.empty()) {
      reply["refreshToken"] = want.next_refresh;
      sso_refresh_.refresh_token = want.next_refresh;  // the old one is spent
    }
    return {200, reply.dump()};
  }
  // An IMDS route's armed failure (503) or drop, if any.
  auto imds_fault = [&](const std::string& route) -> std::optional<Reply> {
    if (drops_[route] > 0) {
      --drops_[route];
      return Reply{0, "", true};
    }
    if (failures_[route] > 0) {
      --failures_[route];
      return Reply{503, ""};
    }
    return std::nullopt;
  };
  if (r.method == "PUT" && r.path == "/latest/api/token") {
    ++counts_["ImdsToken"];
    if (auto fault = imds_fault("ImdsToken")) return *fault;
    if (r.Header("x-aws-ec2-metadata-token-ttl-seconds").empty()) return {400, ""};
    imds_token_ = "imds-token-" + std::to_string(counts_["ImdsToken"]);
    return {200, imds_token_};
  }
  const std::string creds_path = "/latest/meta-data/iam/security-credentials/";
  if (r.method == "GET" && r.path.rfind(creds_path, 0) == 0) {
    std::string role = r.path.substr(creds_path.size());
    const std::string route = role.empty() ? "ImdsRole" : "ImdsCredentials";
    ++counts_[route];
    if (auto fault = imds_fault(route)) return *fault;
    const std::string token = r.Header("x-aws-ec2-metadata-token");
    const bool v1 = token.empty() && imds_v1_;
    if (!v1 && (imds_token_.empty() || token != imds_token_)) return {401, ""};
    if (role.empty()) return {200, "fake-role\n"};
    if (role != "fake-role") return {404, ""};
    return {200, json(NewCredentials(), "Token")};
  }
  return {404, "not found"};
}

}  // namespace vramflow::testing
