// SPDX-License-Identifier: MIT
// The `vramflow` command line: one subcommand per job, each with --help and
// each a class of its own (tools/command.h). Here only: the commands added in
// --help's order, the parse, the signal handling, the chosen command resolved
// and run, and its status turned into the exit status.
//
// Exit status (tools/cli/exit_codes.h, docs/CLI.md): 0 success, 1 the job
// failed (the message says what and where), 2 the command line was wrong,
// 3 the stream is corrupt or incomplete, 4 authentication failed,
// 129/130/143 stopped by SIGHUP/SIGINT/SIGTERM (tools/cli/interrupt.h; its
// temporary files removed).
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/version.h"
#include "tools/bench_command.h"
#include "tools/cli/exit_codes.h"
#include "tools/cli/exit_status.h"
#include "tools/cli/interrupt.h"
#include "tools/command.h"
#include "tools/completion_command.h"
#include "tools/criu_export_command.h"
#include "tools/demo_command.h"
#include "tools/flatten_command.h"
#include "tools/gen_command.h"
#include "tools/inspect_command.h"
#include "tools/json_report.h"
#include "tools/pack_command.h"
#include "tools/s3_cleanup_command.h"
#include "tools/streamer_command.h"
#include "tools/transfer_command.h"
#include "tools/unpack_command.h"
#include "transport/s3/s3_journal.h"

namespace vramflow {
namespace {

// The command whose --json report is due, if any: its failures are
// reported as a JSON object on stdout too.
std::string& JsonCommand() {
  static std::string command;
  return command;
}

// The command's signal handling (tools/cli/interrupt.h), once it is installed.
const Interrupts* interrupts = nullptr;

int Fail(const std::string& command, const Status& status) {
  // Interrupted: the failure is the signal's doing, and the signal's thread
  // is cleaning up and will exit with 128 + its number.
  while (interrupts && interrupts->interrupted()) ::pause();
  // An empty message: the command has said what failed already (s3 cleanup lists each upload).
  if (!status.message().empty())
    std::fprintf(stderr, "vramflow %s: error: %s\n", command.c_str(), status.ToString().c_str());
  const int code = ExitStatusFor(status);
  if (!JsonCommand().empty()) PrintJson(JsonFailure(JsonCommand(), status, code));
  return code;
}

// "pack", "bench codecs": the (sub)commands named on the command line, for
// messages about a command line that did not parse.
std::string CommandPath(const CLI::App& app, int argc, char** argv) {
  std::string path;
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    const CLI::App* sub = nullptr;
    for (const CLI::App* candidate : at->get_subcommands([](const CLI::App*) { return true; }))
      if (candidate->get_name() == arg) sub = candidate;
    if (!sub) break;
    path += (path.empty() ? "" : " ") + arg;
    at = sub;
  }
  return path;
}

// A value the command line parser accepted but the command cannot use
// (unknown codec, data kind, ...): a bad command line, so exit status 2.
int UsageError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "vramflow %s: error: %s\nRun with --help for more information.\n", command.c_str(),
               status.ToString().c_str());
  if (!JsonCommand().empty()) PrintJson(JsonFailure(JsonCommand(), status, kExitUsage));
  return kExitUsage;
}

// Resolves and runs the chosen command (tools/command.h): its exit status.
int RunCommand(Command& command, const CommandContext& context) {
  if (command.json()) JsonCommand() = command.name();
  if (Status s = command.Resolve(); !s.ok()) return UsageError(command.name(), s);
  Status s = command.Run(context);
  if (!command.json()) JsonCommand().clear();  // a report the run printed carries its failure
  return s.ok() ? kExitOk : Fail(command.name(), s);
}

// The commands, each a class of its own (tools/command.h), added to `app` in
// the order --help lists them; criu, s3 and bench are groups of subcommands.
std::vector<std::unique_ptr<Command>> AddCommands(CLI::App* app) {
  std::vector<std::unique_ptr<Command>> commands;
  auto add = [&](CLI::App* parent, std::unique_ptr<Command> command) {
    command->Add(parent);
    commands.push_back(std::move(command));
  };
  auto group = [&](const std::string& name, const std::string& description) {
    CLI::App* group = app->add_subcommand(name, description);
    group->require_subcommand(1);
    return group;
  };
  add(app, std::make_unique<PackCommand>());
  add(app, std::make_unique<UnpackCommand>());
  add(app, std::make_unique<DemoCommand>());
  add(app, std::make_unique<InspectCommand>());
  add(app, std::make_unique<VerifyCommand>());
  add(app, std::make_unique<FlattenCommand>());
  add(app, std::make_unique<SendCommand>());
  add(app, std::make_unique<RecvCommand>());
  add(app, std::make_unique<KeygenCommand>());
  add(app, std::make_unique<GenCommand>());
  add(group("criu", "Work on the CRIU amdgpu plugin's images"), std::make_unique<ExportUpstreamCommand>());
  add(app, std::make_unique<StreamerCommand>());  // criu-image-streamer's drop-in
  add(group("s3", "Work on S3 state that vramflow left behind"), std::make_unique<S3CleanupCommand>());
  CLI::App* bench = group("bench", "Benchmarks");
  add(bench, std::make_unique<CodecBenchCommand>());
  add(bench, std::make_unique<PipelineBenchCommand>());
  // Hidden: the shell completion script, from this very tree (tools/cli/shell_completion.h).
  add(app, std::make_unique<CompletionCommand>(app));
  return commands;
}

// Parses the command line: nothing when a command is to run, else the exit
// status (--help and --version: 0; a command line that did not parse: 2).
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string command = CommandPath(app, argc, argv);
    std::fprintf(stderr, "vramflow%s%s: error: %s\nRun with --help for more information.\n", command.empty() ? "" : " ",
                 command.c_str(), e.what());
    return kExitUsage;
  }
  return std::nullopt;
}

// "pack", "bench codecs": the command that parsed, for the signal handling's messages.
std::string ChosenPath(const CLI::App& app) {
  std::string path;
  for (const CLI::App* cmd = &app; !cmd->get_subcommands().empty();) {
    cmd = cmd->get_subcommands().front();
    path += (path.empty() ? "" : " ") + cmd->get_name();
  }
  return path;
}

int Main(int argc, char** argv) {
  CLI::App app{"vramflow: checkpoint, migrate and restore GPU memory as compressed, checksummed chunk streams"};
  app.set_version_flag("--version", "vramflow " + VersionString());
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success, 1 failure (the message says what and where), 2 bad command line, 3 the stream "
      "is corrupt or incomplete, 4 authentication failed (key, certificate, peer), 129/130/143 stopped by "
      "SIGHUP/SIGINT/SIGTERM (temporary files removed, uploads aborted).");
  const std::vector<std::unique_ptr<Command>> commands = AddCommands(&app);
  if (std::optional<int> exit_status = Parse(app, argc, argv)) return *exit_status;

  // SIGINT, SIGTERM, SIGHUP: before any thread starts (tools/cli/interrupt.h).
  const std::string command_name = ChosenPath(app);
  Interrupts signal_handling(command_name);
  if (!signal_handling.status().ok()) return Fail(command_name, signal_handling.status());
  interrupts = &signal_handling;
  const CommandContext context{signal_handling.cleanup(), s3::DefaultJournalDir(nullptr)};
  for (const std::unique_ptr<Command>& command : commands)
    if (command->chosen()) return RunCommand(*command, context);
  return kExitUsage;
}

}  // namespace
}  // namespace vramflow

int main(int argc, char** argv) {
  // Called as criu-image-streamer (a link to vramflow): be `vramflow streamer`.
  const std::string_view self = argc > 0 ? std::string_view(argv[0]) : std::string_view();
  const size_t slash = self.rfind('/');
  if (self.substr(slash == std::string_view::npos ? 0 : slash + 1) == "criu-image-streamer") {
    std::vector<char*> args(argv, argv + argc);
    static char streamer[] = "streamer";
    args.insert(args.begin() + 1, streamer);
    args.push_back(nullptr);
    return vramflow::Main(argc + 1, args.data());
  }
  return vramflow::Main(argc, argv);
}
