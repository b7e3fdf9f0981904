// SPDX-License-Identifier: MIT
// Credentials that may expire, and a provider that keeps them fresh.
//
// Temporary credentials (STS, container endpoint, instance metadata,
// credential_process) come with an expiration. CredentialProvider caches
// them and fetches new ones once less than RefreshPolicy::margin is left, so
// a long upload signs its late parts with valid keys. A refresh that fails
// while the old keys are still valid keeps them (and tries again after
// RefreshPolicy::retry_after); once they have expired it is an error.
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transport/aws/sigv4.h"

namespace vramflow::s3 {

struct TimedCredentials {
  Credentials credentials;
  std::optional<std::time_t> expiration;  // none: never expire (static keys)
};

struct RefreshPolicy {
  std::chrono::seconds margin{600};      // refresh when less than this is left
  std::chrono::seconds retry_after{10};  // after a failed refresh
};

using CredentialFetch = std::function<Result<TimedCredentials>()>;

// Thread-safe. `source` names where the keys come from, for messages
// ("web identity (AWS_WEB_IDENTITY_TOKEN_FILE) for role arn:...").
class CredentialProvider {
 public:
  CredentialProvider(std::string source, CredentialFetch fetch, RefreshPolicy policy);
  // Valid keys, fetched again when they expire within policy.margin.
  Result<Credentials> Get();
  const std::string& source() const { return source_; }
  // How many times keys were fetched (tests).
  int fetches() const;

 private:
  std::string source_;
  CredentialFetch fetch_;
  RefreshPolicy policy_;
  mutable std::mutex mu_;
  std::optional<TimedCredentials> current_;  // GUARDED_BY(mu_)
  std::time_t next_try_ = 0;                 // GUARDED_BY(mu_)
  int fetches_ = 0;                          // GUARDED_BY(mu_)
};

// "2026-11-24T07:00:00Z" (fractional seconds and "+HH:MM" / "-HH:MM"
// accepted) as UTC. Untrusted input: anything else, a date that does not
// exist or an offset past 23:59 is an error that shows the text escaped.
Result<std::time_t> ParseIso8601(std::string_view text);
std::string FormatIso8601(std::time_t t);

// The longest access key, secret or session token accepted.
inline constexpr size_t kMaxCredentialField = 16 * 1024;

// Keys from a credential source are untrusted: the access key and token go
// into request headers, so they must be printable ASCII without spaces, the
// secret printable ASCII; none longer than kMaxCredentialField. The error
// names the field and `what`, never the value.
Status CheckCredentials(const Credentials& credentials, const std::string& what);

// The JSON that credential_process, the container endpoint and instance
// metadata return: AccessKeyId, SecretAccessKey, SessionToken or Token,
// Expiration, checked as above. `what` names the source for errors; the
// source's own text (its Message) is shown escaped.
Result<TimedCredentials> ParseCredentialJson(std::string_view json, const std::string& what);

}  // namespace vramflow::s3
