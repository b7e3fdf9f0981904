// SPDX-License-Identifier: MIT
// Settings of the s3:// transport (TransportOptions::s3). Every field has a
// default that works against AWS and a local Ceph RGW; tests shrink the
// limits and timeouts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/cleanup_registry.h"

namespace vramflow {

// S3's multipart limits (docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
// Injectable so a test can simulate them with small numbers.
struct S3Limits {
  uint64_t min_part_size = 5ull << 20;  // every part but the last
  uint64_t max_part_size = 5ull << 30;
  uint32_t max_parts = 10000;
};

// How long aborting an upload may take when the process is interrupted (the
// network may be gone): then the journal record stays for `s3 cleanup`.
inline constexpr std::chrono::seconds kInterruptAbortDeadline{5};

// Server-side encryption of the objects written and read (docs/S3.md,
// "Encryption"), as the aws CLI's --sse, --sse-kms-key-id and --sse-c-key.
struct S3Encryption {
  // How objects written are encrypted at rest: "" (as the bucket's default
  // says), "AES256" (SSE-S3) or "aws:kms" (SSE-KMS, under kms_key_id, else
  // the account's default key).
  std::string sse;
  std::string kms_key_id;
  // SSE-C: the 32 bytes S3 encrypts objects written with. S3 keeps a hash
  // of it, not the key, and serves the object, or its metadata, only to
  // requests that send the key again: it goes with every request on an
  // object, so never over http to another machine. Empty: no SSE-C.
  std::string customer_key;
};

struct S3Options {
  // Upload: bytes of part buffers alive at once (the one being filled and
  // those uploading). Parts in flight x part size <= memory_budget, except
  // that one part is always allowed (see docs/S3.md, "Part sizes").
  // Download: bytes of ranges fetched ahead.
  uint64_t memory_budget = 64ull << 20;
  // First part size; 0 = memory_budget / (concurrency + 1), at least
  // limits.min_part_size. Parts grow from there (s3_part_plan.h).
  uint64_t part_size = 0;
  // Requests in flight at most (uploads or ranged GETs); 0 = 8.
  unsigned concurrency = 0;
  // Download range size (bytes per ranged GET).
  uint64_t range_size = 8ull << 20;
  // Overrides of the environment / ~/.aws settings (s3_config.h); empty =
  // not overridden. addressing: "path" or "virtual".
  std::string endpoint;  // --endpoint-url
  std::string region;    // --region
  std::string addressing;
  // --profile: the profile to use; unlike AWS_PROFILE it also skips the
  // environment's keys (as the aws CLI's --profile does).
  std::string profile;
  // --ca-bundle: PEM file of the CAs an https endpoint's certificate must
  // chain to (else AWS_CA_BUNDLE, the profile's ca_bundle, SSL_CERT_FILE /
  // SSL_CERT_DIR, the system's store).
  std::string ca_bundle;
  // Temporary credentials are fetched again when less than this is left
  // (tests shrink it; see transport/aws/credentials.h).
  std::chrono::seconds credential_refresh_margin{600};
  // Base URL of AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (tests: a loopback fake).
  std::string container_credentials_base = "http://169.254.170.2";
  std::chrono::milliseconds connect_timeout{10000};
  // A request that moves no byte for this long fails (and is retried).
  std::chrono::milliseconds stall_timeout{30000};
  // Attempts per request = retries + 1; waits double from backoff_base up
  // to backoff_max, with random jitter (half to full wait).
  unsigned retries = 5;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_max{10000};
  S3Limits limits;
  S3Encryption encryption;
  // Upload: replace an existing object. When false, OpenS3Sink() sends HEAD
  // first and refuses a key that exists (kAlreadyExists), as a file sink
  // refuses an existing file (FileSinkOptions::overwrite; the CLI's --force).
  bool overwrite = false;
  // Upload: where multipart uploads in progress are journaled (s3_journal.h)
  // so that `vramflow s3 cleanup` can abort those of a killed writer, and
  // where the next upload aborts them; "" = no journal.
  std::string journal_dir;
  // If the process is interrupted (common/cleanup_registry.h): an upload's
  // multipart upload in progress is aborted, within kInterruptAbortDeadline,
  // and a credential_process running is killed with its process group.
  CleanupRegistry* cleanup = nullptr;
  // Environment lookup (tests inject one); empty = ::getenv.
  std::function<const char*(const char*)> getenv;
};

}  // namespace vramflow
