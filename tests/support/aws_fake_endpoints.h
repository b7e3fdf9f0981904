// SPDX-License-Identifier: MIT
// FakeAws: AWS's credential services on loopback for the credential chain's
// tests (transport/aws/credential_chain.h), one HTTP/1.1 server for all:
//
//   STS        POST /  Action=AssumeRole (SigV4-signed, service "sts"; the
//              signature is checked against the source key given to
//              AllowSource, or a key it issued itself, with its token: role
//              chaining) and Action=AssumeRoleWithWebIdentity (the token
//              must equal SetWebIdentityToken's).
//   container  GET /container/creds: "Authorization:" must equal
//              SetContainerToken's (when set).
//   SSO        GET /federation/credentials?role_name=R&account_id=A:
//              "x-amz-sso_bearer_token:" must equal SetSsoToken's.
//   SSO OIDC   POST /token, JSON {grantType: "refresh_token", clientId,
//              clientSecret, refreshToken} (CreateToken, as the aws CLI
//              sends it to renew a cached SSO token): with SetSsoRefresh's
//              client and refresh token, replies with its new access token,
//              which from then on is the one the SSO route accepts.
//   IMDS       PUT /latest/api/token, GET /latest/meta-data/iam/security-credentials/[ROLE]
//              (the token from the PUT is required, as with HttpTokens
//              "required"; SetImdsV1(true): optional, IMDSv1 GETs answered).
//
// Every set of credentials it issues is fresh (new key, secret and session
// token), lives `lifetime` seconds, and is handed to the FakeS3 given at
// construction (FakeS3::AddKey), so S3 accepts exactly the keys issued and
// the token that goes with them. Thread-safe.
#pragma once

#include <atomic>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/s3_fake_server.h"

namespace vramflow::testing {

class FakeAws {
 public:
  FakeAws(FakeS3* s3, int lifetime_seconds = 3600);
  ~FakeAws();
  FakeAws(const FakeAws&) = delete;
  FakeAws& operator=(const FakeAws&) = delete;

  // "http://127.0.0.1:PORT".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // AssumeRole requests must be signed with this key (and token, if any).
  void AllowSource(const std::string& access_key, const std::string& secret_key, const std::string& token = "");
  void SetWebIdentityToken(const std::string& token);
  void SetContainerToken(const std::string& token);
  void SetSsoToken(const std::string& token);
  // CreateToken accepts this client (id, secret) and refresh token, and
  // returns `access_token`, valid for `expires_in` seconds, and
  // `next_refresh` as the new refresh token unless it is empty.
  void SetSsoRefresh(const std::string& client_id, const std::string& client_secret, const std::string& refresh_token,
                     const std::string& access_token, int expires_in, const std::string& next_refresh);
  void SetLifetime(int seconds);
  // The next `times` requests of `route` (see Count) get HTTP 503.
  void FailNext(const std::string& route, int times);
  // The next `times` requests of `route` get no reply: the connection is
  // closed (as a hop limit of 1 loses IMDS's reply to a container).
  void DropNext(const std::string& route, int times);
  void SetImdsV1(bool allowed);
  // The next request of `route` (see Count; "Other" for any path no route
  // serves, such as an S3 request) gets `status` and `body` as they are: a
  // hostile or broken service.
  void AnswerNext(const std::string& route, int status, const std::string& body);

  // Requests per route: "AssumeRole", "AssumeRoleWithWebIdentity",
  // "Container", "Sso", "OidcToken", "ImdsToken", "ImdsRole", "ImdsCredentials"; refused ones too.
  int Count(const std::string& route) const;
  // Form fields of the last STS request (RoleArn, RoleSessionName, ExternalId,
  // ...), or the query of the last SSO request (role_name, account_id).
  std::map<std::string, std::string> LastStsForm() const;
  // Runs `hook` on each OIDC CreateToken request before it is answered
  // (another client acting meanwhile). It must not call FakeAws.
  void OnOidcRequest(std::function<void()> hook);
  // The body of the last OIDC CreateToken request.
  std::string LastOidcBody() const;
  // Access keys issued, in order.
  std::vector<std::string> Issued() const;

 private:
  struct Request;
  struct Reply {
    int status = 200;
    std::string body;
    bool dropped = false;  // no reply: the connection is closed
  };
  void AcceptLoop();
  void Serve(int fd);
  Reply Handle(const Request& r);
  Reply Route(const Request& r);  // REQUIRES(mu_); what Handle answers unless AnswerNext says
  // New credentials: registered with the FakeS3, returned as (key, secret, token, expiry).
  struct Issue {
    std::string key, secret, token;
    std::time_t expires;
  };
  Issue NewCredentials();                                 // REQUIRES(mu_)
  std::string CheckStsSignature(const Request& r) const;  // REQUIRES(mu_)

  FakeS3* s3_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::vector<std::thread> connections_;                   // GUARDED_BY(mu_)
  int lifetime_;                                           // GUARDED_BY(mu_)
  std::string source_key_, source_secret_, source_token_;  // GUARDED_BY(mu_)
  std::string web_identity_token_;                         // GUARDED_BY(mu_)
  std::string container_token_;                            // GUARDED_BY(mu_)
  std::string sso_token_;                                  // GUARDED_BY(mu_)
  struct SsoRefresh {
    std::string client_id, client_secret, refresh_token, access_token, next_refresh;
    int expires_in = 0;
  } sso_refresh_;                                                           // GUARDED_BY(mu_)
  std::string last_oidc_body_;                                              // GUARDED_BY(mu_)
  std::function<void()> oidc_hook_;                                         // GUARDED_BY(mu_)
  std::string imds_token_;                                                  // GUARDED_BY(mu_)
  bool imds_v1_ = false;                                                    // GUARDED_BY(mu_)
  std::map<std::string, int> drops_;                                        // GUARDED_BY(mu_)
  std::map<std::string, int> counts_;                                       // GUARDED_BY(mu_)
  std::map<std::string, int> failures_;                                     // GUARDED_BY(mu_)
  std::map<std::string, std::vector<std::pair<int, std::string>>> canned_;  // GUARDED_BY(mu_), AnswerNext's
  std::map<std::string, std::string> last_form_;                            // GUARDED_BY(mu_)
  std::vector<std::string> issued_;                                         // GUARDED_BY(mu_)
  std::map<std::string, std::pair<std::string, std::string>> issued_keys_;  // key -> (secret, token); GUARDED_BY(mu_)
  int serial_ = 0;                                                          // GUARDED_BY(mu_)
};

}  // namespace vramflow::testing
