// SPDX-License-Identifier: MIT
#include "tools/s3_cleanup_command.h"

#include <cstdio>

#include "transport/s3/s3_journal.h"

namespace vramflow {

void S3CleanupCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "cleanup",
      "Abort the multipart uploads that a killed vramflow left pending (journaled in $XDG_STATE_HOME/"
      "vramflow/s3-uploads, else ~/.local/state/vramflow/s3-uploads), with the credentials of this "
      "environment; uploads of running processes are left alone");
  cmd_->add_option("--journal", journal_, "the journal directory (default: as above)");
  cmd_->add_flag("--all", all_, "also abort the uploads of processes still running");
  s3_.Add(cmd_, /*encryption=*/false);  // aborting an upload needs no key
}

Status S3CleanupCommand::Resolve() {
  if (journal_.empty()) journal_ = s3::DefaultJournalDir(nullptr);
  if (journal_.empty()) return Status::InvalidArgument("neither XDG_STATE_HOME nor HOME is set: give --journal");
  return s3_.Resolve(&options_);
}

Status S3CleanupCommand::Run(const CommandContext& context) {
  options_.cleanup = context.cleanup;  // an interrupt kills a credential_process
  const s3::CleanupReport report = s3::AbortJournaledUploads(journal_, options_, all_);
  std::fprintf(stderr, "vramflow s3 cleanup: aborted %u upload(s); %u of running processes left alone (%s)\n",
               report.aborted, report.skipped, journal_.c_str());
  for (const std::string& failure : report.failures)
    std::fprintf(stderr, "vramflow s3 cleanup: not aborted: %s\n", failure.c_str());
  if (report.failures.empty()) return Status::Ok();
  return Status::IoError("");  // each failure is listed above
}

}  // namespace vramflow
