// SPDX-License-Identifier: MIT
// Where S3 requests go and who signs them, resolved the way the `aws` CLI
// does, so a machine set up for `aws s3 cp` works unchanged:
//
//   profile      S3Options::profile (--profile), AWS_PROFILE,
//                AWS_DEFAULT_PROFILE, else "default"; read from
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and
//                AWS_CONFIG_FILE (~/.aws/config, sections "[profile NAME]")
//   credentials  botocore's chain (transport/aws/credential_chain.h): environment,
//                assume role, web identity, files, credential_process,
//                container endpoint, instance metadata
//   region       S3Options::region, AWS_REGION, AWS_DEFAULT_REGION, the
//                profile's `region`, else us-east-1
//   CA bundle    S3Options::ca_bundle (--ca-bundle), AWS_CA_BUNDLE, the
//                profile's `ca_bundle`, SSL_CERT_FILE / SSL_CERT_DIR (as
//                curl and OpenSSL read them), else the system's store
//   endpoint     S3Options::endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
//                the profile's `endpoint_url` (or `s3 =` / `endpoint_url`),
//                else https://s3.REGION.amazonaws.com
//   addressing   S3Options::addressing, VRAMFLOW_S3_ADDRESSING, the
//                profile's `s3 =` / `addressing_style`; else path-style for
//                a custom endpoint, virtual-host style for AWS
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/aws/credential_chain.h"
#include "transport/aws/http.h"
#include "transport/aws/sigv4.h"
#include "transport/s3/s3_options.h"

namespace vramflow::s3 {

struct Config {
  // Never null after LoadConfig(); keeps temporary keys fresh.
  std::shared_ptr<CredentialProvider> credentials;
  std::string region;
  std::string scheme;  // "http" or "https"
  std::string host;    // "127.0.0.1:7480", "s3.us-east-1.amazonaws.com"
  bool path_style = true;
  std::string credentials_source;  // for messages: "environment", "profile 'x' in FILE"
  TlsTrust trust;                  // CAs for https endpoints
};

// Resolves the settings above. Errors say which setting is missing or bad.
Result<Config> LoadConfig(const S3Options& options);

// An INI file as the AWS CLI reads it: {section: {key: value}}; nested
// lines under "s3 =" become "s3.KEY". A missing file is an empty map.
Result<std::map<std::string, std::map<std::string, std::string>>> ReadIniFile(const std::string& path);

}  // namespace vramflow::s3
