// SPDX-License-Identifier: MIT
// The aws CLI's global S3 flags, for every command that takes s3:// URIs:
// --endpoint-url, --region, --profile, --ca-bundle. Each overrides its
// environment / ~/.aws setting (transport/s3/s3_config.h); --profile also
// skips the environment's keys, as `aws --profile` does. And, as `aws s3
// cp` has them, the server-side encryption flags: --sse, --sse-kms-key-id,
// --sse-c-key (transport/s3/s3_encryption.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"
#include "transport/s3/s3_options.h"

namespace vramflow {

struct S3Flags {
  std::string endpoint_url;
  std::string region;
  std::string profile;
  std::string ca_bundle;
  std::string sse;
  std::string sse_kms_key_id;
  std::string sse_c_key_file;

  // `encryption`: also the encryption flags (commands that read or write
  // objects' data).
  void Add(CLI::App* cmd, bool encryption = true);
  // Copies the flags given into `options` (an empty flag leaves it alone);
  // an error is a bad command line.
  Status Resolve(S3Options* options) const;
  // Reads --sse-c-key's file into `options`, after Resolve: a key that
  // cannot be read fails the job (exit status 1), as a missing input does.
  Status LoadEncryptionKey(S3Options* options) const;
};

}  // namespace vramflow
