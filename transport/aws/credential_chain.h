// SPDX-License-Identifier: MIT
// Where S3 requests get their keys: botocore's credential chain, in its
// order, so a machine set up for `aws s3 cp` works unchanged.
//
//   1 environment      AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//                      skipped when the profile was named with --profile (which
//                      also hides the web identity variables of 3)
//   2 assume role      the profile's role_arn with source_profile (a profile
//                      with keys, a role, web identity, SSO or credential_process;
//                      chained up to 8 deep) or
//                      credential_source (Environment, Ec2InstanceMetadata,
//                      EcsContainer): STS AssumeRole signed with those keys
//   3 web identity     AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
//                      (+ AWS_ROLE_SESSION_NAME), or the profile's
//                      web_identity_token_file + role_arn: STS
//                      AssumeRoleWithWebIdentity (the file is read at each refresh)
//   4 SSO              sso_start_url / sso_session profiles: the token that
//                      `aws sso login` cached, then GetRoleCredentials (sso.h)
//   5 credentials file the profile's aws_access_key_id / aws_secret_access_key
//   6 process          the profile's credential_process
//   7 config file      the profile's keys in ~/.aws/config
//   8 container        AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI (metadata.h)
//   9 instance         EC2 IMDSv2 unless AWS_EC2_METADATA_DISABLED=true
//
// STS is reached at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else the
// profile's `sts =` / `endpoint_url`, else https://sts.REGION.amazonaws.com.
// The first source configured wins; if it then fails (STS refuses, the
// process exits 1) that is the error, as in botocore. Temporary keys are
// refreshed before they expire (credentials.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "transport/aws/credentials.h"
#include "transport/aws/http.h"

namespace vramflow::s3 {

using Getenv = std::function<const char*(const char*)>;
using Ini = std::map<std::string, std::map<std::string, std::string>>;

struct ChainInputs {
  Getenv getenv;
  std::string profile;            // resolved name ("default" when none)
  bool profile_explicit = false;  // --profile: environment keys are not used
  Ini credentials_file;           // parsed ~/.aws/credentials
  Ini config_file;                // parsed ~/.aws/config
  std::string credentials_path;   // for messages
  std::string config_path;
  std::string region;  // STS's signing region
  TlsTrust trust;      // for STS and https metadata endpoints
  RefreshPolicy refresh;
  // Base of AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (tests point it at loopback).
  std::string container_base = "http://169.254.170.2";
  std::chrono::milliseconds process_timeout{60000};
  // A credential_process running when the command is interrupted is killed
  // with its process group (credential_process.h); nullptr: it is not.
  CleanupRegistry* cleanup = nullptr;
};

// The first configured source's provider, its keys fetched once (so a
// source that fails says so here, before any transfer starts).
Result<std::shared_ptr<CredentialProvider>> ResolveCredentialChain(const ChainInputs& inputs);

}  // namespace vramflow::s3
