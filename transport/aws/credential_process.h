// SPDX-License-Identifier: MIT
// A profile's `credential_process`: run the command, read its JSON from
// stdout ({"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken",
// "Expiration"}), as the AWS CLI does. Bounded: at most `max_output` bytes
// of output and `timeout` of time; past either the command is killed, with
// everything it started (it runs in a process group of its own), as it is
// when the vramflow command is interrupted (SIGINT, SIGTERM, SIGHUP).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "transport/aws/credentials.h"

namespace vramflow::s3 {

struct CredentialProcessOptions {
  // Names the command in errors ("credential_process of profile 'ci'"):
  // never its command line, which may carry a secret.
  std::string what = "credential_process";
  std::chrono::milliseconds timeout{60000};
  size_t max_output = 64 * 1024;  // of stdout
  // While the command runs, an interrupt (common/cleanup_registry.h) kills
  // its process group; nullptr: not registered.
  CleanupRegistry* cleanup = nullptr;
};

// `command` runs through /bin/sh -c, stdin /dev/null. Its stderr is kept
// (the first kKeptStderr bytes) and shown, escaped, in the error when it
// fails, as the AWS CLI shows it; on success it is dropped. A non-zero
// exit, a signal, bad JSON or a Version other than 1 is an error naming
// `options.what`.
inline constexpr size_t kKeptStderr = 1024;
Result<TimedCredentials> RunCredentialProcess(const std::string& command, const CredentialProcessOptions& options = {});

// What a credential_process printed: a JSON object with "Version": 1 and
// the fields of ParseCredentialJson. `what` names it for errors (exposed
// for the fuzz target).
Result<TimedCredentials> ParseCredentialProcessOutput(std::string_view output, const std::string& what);

}  // namespace vramflow::s3
