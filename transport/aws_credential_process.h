// SPDX-License-Identifier: MIT
// A profile's `credential_process`: run the command, read its JSON from
// stdout ({"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken",
// "Expiration"}), as the AWS CLI does. Bounded: at most `max_output` bytes
// of output and `timeout` of time; past either the command is killed.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/status.h"
#include "transport/aws_credentials.h"

namespace vramflow::s3 {

// `command` runs through /bin/sh -c (its stderr goes to ours). A non-zero
// exit, a signal, bad JSON or a Version other than 1 is an error naming it.
Result<TimedCredentials> RunCredentialProcess(const std::string& command,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                              size_t max_output = 64 * 1024);

}  // namespace vramflow::s3
