// Where S3 requests go and who signs them, resolved the way the `aws` CLI
// does, so a machine set up for `aws s3 cp` works unchanged:
//
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//                else profile AWS_PROFILE (else "default") in
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then in
//                AWS_CONFIG_FILE (~/.aws/config, sections "[profile NAME]")
//   region       S3Options::region, AWS_REGION, AWS_DEFAULT_REGION, the
//                profile's `region`, else us-east-1
//   endpoint     S3Options::endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
//                the profile's `endpoint_url` (or `s3 =` / `endpoint_url`),
//                else https://s3.REGION.amazonaws.com
//   addressing   S3Options::addressing, VRAMFLOW_S3_ADDRESSING, the
//                profile's `s3 =` / `addressing_style`; else path-style for
//                a custom endpoint, virtual-host style for AWS
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/status.h"
#include "transport/s3_options.h"
#include "transport/s3_signer.h"

namespace vramflow::s3 {

struct Config {
  Credentials credentials;
  std::string region;
  std::string scheme;  // "http" or "https"
  std::string host;    // "127.0.0.1:7480", "s3.us-east-1.amazonaws.com"
  bool path_style = true;
  std::string credentials_source;  // for messages: "environment", "profile 'x' in FILE"
};

using Getenv = std::function<const char*(const char*)>;

// Resolves the settings above. Errors say which setting is missing or bad.
Result<Config> LoadConfig(const S3Options& options);

// An INI file as the AWS CLI reads it: {section: {key: value}}; nested
// lines under "s3 =" become "s3.KEY". A missing file is an empty map.
Result<std::map<std::string, std::map<std::string, std::string>>> ReadIniFile(const std::string& path);

}  // namespace vramflow::s3
