// SPDX-License-Identifier: MIT
#include "tools/cli/s3_flags.h"

#include "transport/s3/s3_encryption.h"

namespace vramflow {

void S3Flags::Add(CLI::App* cmd, bool encryption) {
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
  if (!encryption) return;
  group->add_option("--sse", sse,
                    "s3://: encrypt objects written at rest, AES256 (SSE-S3) or aws:kms (SSE-KMS) (default: as the "
                    "bucket says)");
  group->add_option("--sse-kms-key-id", sse_kms_key_id,
                    "s3://: with --sse aws:kms, the KMS key (default: the account's S3 key)");
  group->add_option("--sse-c-key", sse_c_key_file,
                    "s3://: SSE-C: FILE holds the 32-byte key (raw or base64) that objects are written with and "
                    "read with; https endpoints only (or a loopback address)");
}

Status S3Flags::Resolve(S3Options* options) const {
  if (!endpoint_url.empty()) options->endpoint = endpoint_url;
  if (!region.empty()) options->region = region;
  if (!profile.empty()) options->profile = profile;
  if (!ca_bundle.empty()) options->ca_bundle = ca_bundle;
  if (!sse.empty()) options->encryption.sse = sse;
  if (!sse_kms_key_id.empty()) options->encryption.kms_key_id = sse_kms_key_id;
  return s3::CheckEncryptionModes(sse, sse_kms_key_id, !sse_c_key_file.empty());
}

Status S3Flags::LoadEncryptionKey(S3Options* options) const {
  if (sse_c_key_file.empty()) return Status::Ok();
  VF_ASSIGN_OR_RETURN(options->encryption.customer_key, s3::LoadCustomerKey(sse_c_key_file));
  return Status::Ok();
}

}  // namespace vramflow
