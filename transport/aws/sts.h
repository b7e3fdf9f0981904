// SPDX-License-Identifier: MIT
// AWS STS: AssumeRole (signed with the source credentials) and
// AssumeRoleWithWebIdentity (unsigned; the OIDC token is the proof), as the
// credential chain (credential_chain.h) uses them. Query API over POST,
// XML replies parsed with xml.h.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "transport/aws/credentials.h"
#include "transport/aws/http.h"

namespace vramflow::s3 {

struct StsEndpoint {
  std::string url;     // "https://sts.us-east-1.amazonaws.com"
  std::string region;  // signing region
  TlsTrust trust;
  std::chrono::milliseconds timeout{10000};
};

struct AssumeRoleParams {
  std::string role_arn;
  std::string session_name;
  std::string external_id;        // AssumeRole only; optional
  unsigned duration_seconds = 0;  // 0: STS's default (one hour)
};

// The temporary credentials of `params.role_arn`, asking as `source`.
Result<TimedCredentials> AssumeRole(const StsEndpoint& sts, const Credentials& source, const AssumeRoleParams& params);

// The same for a web identity token (EKS IRSA's projected token file).
Result<TimedCredentials> AssumeRoleWithWebIdentity(const StsEndpoint& sts, const std::string& token,
                                                   const AssumeRoleParams& params);

// The credentials in an AssumeRole(WithWebIdentity)Response, or the error
// of an ErrorResponse (exposed for tests).
Result<TimedCredentials> ParseStsReply(long status, const std::string& body, const std::string& what);

}  // namespace vramflow::s3
