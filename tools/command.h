// SPDX-License-Identifier: MIT
// Command: one `vramflow` command (or one subcommand of a group: `bench codecs`, `s3 cleanup`),
// its flags, the check of its command line and its run, so that main.cc only registers the
// commands, parses, dispatches and turns statuses into exit statuses (tools/cli/exit_codes.h).
//
// The order of a run: Add() before parsing; after parsing, the chosen command's Resolve() (a
// failure is a bad command line: exit status 2), then Run() (a failure exits with
// ExitStatusFor(status): 1, 3 or 4). main.cc installs the signal handling between the two, so
// Resolve() starts no thread and creates nothing.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "transport/open_uri.h"

namespace vramflow {

// What main.cc hands every command once signals are handled (tools/cli/interrupt.h).
struct CommandContext {
  // Run by the signal handling thread on SIGINT, SIGTERM and SIGHUP: temporary files, partial
  // outputs, uploads to abort.
  CleanupRegistry* cleanup = nullptr;
  // Where S3 multipart uploads are journaled (transport/s3/s3_journal.h).
  std::string s3_journal_dir;

  // Registers a command's transports with `cleanup` and the journal: what a signal must undo.
  void MakeInterruptible(TransportOptions* options) const {
    options->file.cleanup = cleanup;
    options->net.cleanup = cleanup;
    options->s3.cleanup = cleanup;
    options->s3.journal_dir = s3_journal_dir;
  }
};

class Command {
 public:
  virtual ~Command() = default;

  // Adds the command and its flags under `parent` (the app, or the group it belongs to).
  virtual void Add(CLI::App* parent) = 0;
  // Was this command given on the command line?
  virtual bool chosen() const = 0;
  // "pack", "bench codecs": the name in messages.
  virtual std::string name() const = 0;
  // --json given: a failure is reported as a JSON object on stdout too. Asked before Resolve() and
  // again after Run(): false then where the run printed a report that carries its failure (inspect).
  virtual bool json() const { return false; }
  // Checks and resolves the parsed flags; a failure is a bad command line.
  virtual Status Resolve() = 0;
  // Does the job and prints its summary or report; a failure is the job's. A
  // failure with an empty message is one the command has reported itself (s3
  // cleanup lists every upload it could not abort): main.cc then prints no
  // error line, only exits with its status.
  virtual Status Run(const CommandContext& context) = 0;
};

}  // namespace vramflow
