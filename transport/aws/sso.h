// SPDX-License-Identifier: MIT
// AWS IAM Identity Center (SSO) profiles, as the aws CLI reads them after
// `aws sso login`: the access token cached in ~/.aws/sso/cache/SHA1.json
// (SHA1 of the sso_session name, or of sso_start_url for legacy profiles),
// then GetRoleCredentials at https://portal.sso.REGION.amazonaws.com
// (AWS_ENDPOINT_URL_SSO overrides it).
//
// As the aws CLI does for a profile with an sso_session: a token with less
// than 15 minutes left is first renewed with the refresh token that
// `aws sso login` cached beside it (OIDC CreateToken, POST /token at
// https://oidc.REGION.amazonaws.com; AWS_ENDPOINT_URL_SSO_OIDC overrides it),
// and the new token is written back to the cache in the CLI's format. A
// token that cannot be renewed is used while it lasts; an expired or
// missing one is an error saying to run `aws sso login`.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "transport/aws/credentials.h"
#include "transport/aws/http.h"

namespace vramflow::s3 {

struct SsoProfile {
  std::string profile;     // for messages
  std::string session;     // sso_session name; empty for a legacy profile
  std::string start_url;   // sso_start_url
  std::string region;      // sso_region
  std::string account_id;  // sso_account_id
  std::string role_name;   // sso_role_name
  std::string cache_dir;   // ~/.aws/sso/cache
  std::string portal_url;  // empty: https://portal.sso.REGION.amazonaws.com
  std::string oidc_url;    // empty: https://oidc.REGION.amazonaws.com
  TlsTrust trust;
  std::chrono::milliseconds timeout{10000};
};

// The cache file's name: lower-case hex SHA-1 of `key` plus ".json".
std::string SsoCacheFileName(const std::string& key);

Result<TimedCredentials> FetchSsoCredentials(const SsoProfile& sso);

}  // namespace vramflow::s3
