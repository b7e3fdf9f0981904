// SPDX-License-Identifier: MIT
// The aws CLI's global S3 flags, for every command that takes s3:// URIs:
// --endpoint-url, --region, --profile, --ca-bundle. Each overrides its
// environment / ~/.aws setting (transport/s3_config.h); --profile also
// skips the environment's keys, as `aws --profile` does.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "transport/s3_options.h"

namespace vramflow {

struct S3Flags {
  std::string endpoint_url;
  std::string region;
  std::string profile;
  std::string ca_bundle;

  void Add(CLI::App* cmd);
  // Copies the flags given into `options` (an empty flag leaves it alone).
  void Resolve(S3Options* options) const;
};

}  // namespace vramflow
