// SPDX-License-Identifier: MIT
#include "tools/s3_flags.h"

namespace vramflow {

void S3Flags::Add(CLI::App* cmd) {
  auto* group = cmd->add_option_group("s3", "s3://BUCKET/KEY (as the aws CLI; see docs/S3.md)");
  group->add_option("--endpoint-url", endpoint_url,
                    "s3://: the S3 endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL_S3, "
                    "$AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS)");
  group->add_option("--region", region, "s3://: the region (default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's)");
  group->add_option("--profile", profile,
                    "s3://: the ~/.aws profile; its credentials are used even where AWS_ACCESS_KEY_ID is set");
  group->add_option("--ca-bundle", ca_bundle,
                    "s3://: PEM file of the CAs that sign the endpoint's certificate (default: $AWS_CA_BUNDLE, the "
                    "profile's ca_bundle, $SSL_CERT_FILE, the system's)");
}

void S3Flags::Resolve(S3Options* options) const {
  if (!endpoint_url.empty()) options->endpoint = endpoint_url;
  if (!region.empty()) options->region = region;
  if (!profile.empty()) options->profile = profile;
  if (!ca_bundle.empty()) options->ca_bundle = ca_bundle;
}

}  // namespace vramflow
