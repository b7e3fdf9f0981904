// SPDX-License-Identifier: MIT
// The multipart upload journal: one small file per upload in progress, so
// that an upload whose writer was SIGKILLed (no handler runs then; parts
// already sent stay stored, and billed, until aborted) can be found and
// aborted later by `vramflow s3 cleanup`, or by the next upload.
//
// Where: S3Options::journal_dir; the CLI uses $XDG_STATE_HOME/vramflow/
// s3-uploads, else ~/.local/state/vramflow/s3-uploads (DefaultJournalDir).
// Each file, "<owner tag>-<random>.upload" (common/owner_tag.h), holds
// lines "name value" (value percent-encoded): endpoint, addressing, region,
// bucket, key, upload_id, owner. It is written once CreateMultipartUpload
// has answered and removed once the upload is completed or aborted.
// Credentials are never written: cleanup uses the ones it is run with.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "transport/s3/s3_options.h"

namespace vramflow::s3 {

struct JournaledUpload {
  std::string file;        // its journal file (empty until written)
  std::string owner;       // owner tag of the writer
  std::string endpoint;    // scheme://host[:port]
  std::string addressing;  // "path" or "virtual"
  std::string region;
  std::string bucket;
  std::string key;
  std::string upload_id;
};

// $XDG_STATE_HOME/vramflow/s3-uploads, else $HOME/.local/state/vramflow/
// s3-uploads; "" when neither variable is set.
std::string DefaultJournalDir(const std::function<const char*(const char*)>& getenv);

// Records `upload` in `dir` (created if missing); sets upload->file.
Status Journal(const std::string& dir, JournaledUpload* upload);
// Removes the record (best effort).
void Forget(const JournaledUpload& upload);
// Every record in `dir` (none when it does not exist). Unreadable or
// malformed files are reported in `problems` and skipped.
std::vector<JournaledUpload> ReadJournal(const std::string& dir, std::vector<std::string>* problems);

struct CleanupReport {
  unsigned aborted = 0;               // uploads aborted (or already gone at S3)
  unsigned skipped = 0;               // of a live process
  std::vector<std::string> failures;  // what could not be aborted, and why
};
// Aborts every journaled upload whose writer is no longer running (all of
// them with `include_live`), removing its record; `options` supplies the
// credentials and timeouts, the record the endpoint, region and bucket.
CleanupReport AbortJournaledUploads(const std::string& dir, const S3Options& options, bool include_live);

}  // namespace vramflow::s3
