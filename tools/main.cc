// SPDX-License-Identifier: MIT
// The `vramflow` command line: one subcommand per job, each with --help.
//
// Exit status (tools/cli/exit_codes.h, docs/CLI.md): 0 success, 1 the job
// failed (the message says what and where), 2 the command line was wrong,
// 3 the stream is corrupt or incomplete, 4 authentication failed,
// 129/130/143 stopped by SIGHUP/SIGINT/SIGTERM (tools/cli/interrupt.h; its
// temporary files removed).
#include <CLI/CLI.hpp>
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string_view>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/printable.h"
#include "common/units.h"
#include "common/version.h"
#include "datagen/model_data.h"
#include "streamer/format/frame_format.h"
#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline_fit.h"
#include "tools/cli/cli_uri.h"
#include "tools/cli/cli_util.h"
#include "tools/codec_bench.h"
#include "tools/cli/command_flags.h"
#include "tools/command.h"
#include "tools/criu_export.h"
#include "tools/demo_command.h"
#include "tools/flatten_command.h"
#include "tools/cli/exit_codes.h"
#include "tools/cli/exit_status.h"
#include "tools/gen_command.h"
#include "tools/inspect_command.h"
#include "tools/pipeline_bench.h"
#include "tools/cli/interrupt.h"
#include "tools/json_report.h"
#include "tools/pack_command.h"
#include "tools/cli/shell_completion.h"
#include "tools/streamer_command.h"
#include "tools/transfer_command.h"
#include "tools/unpack_command.h"
#include "tools/cli/transport_flags.h"
#include "transport/core/fd_stream.h"
#include "transport/s3/s3_journal.h"
#include "transport/core/uri.h"

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

int Main(int argc, char** argv) {
  CLI::App app{"vramflow: checkpoint, migrate and restore GPU memory as compressed, checksummed chunk streams"};
  app.set_version_flag("--version", "vramflow " + VersionString());
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 failure (the message says what and where), 2 bad command line, 3 the stream "
             "is corrupt or incomplete, 4 authentication failed (key, certificate, peer), 129/130/143 stopped by "
             "SIGHUP/SIGINT/SIGTERM (temporary files removed, uploads aborted).");
  // The commands, each a class of its own (tools/command.h), added in the order --help lists them.
  std::vector<std::unique_ptr<Command>> commands;

  // pack
  commands.push_back(std::make_unique<PackCommand>());
  commands.back()->Add(&app);

  // unpack
  commands.push_back(std::make_unique<UnpackCommand>());
  commands.back()->Add(&app);

  // demo
  commands.push_back(std::make_unique<DemoCommand>());
  commands.back()->Add(&app);

  // inspect
  commands.push_back(std::make_unique<InspectCommand>());
  commands.back()->Add(&app);

  // verify
  commands.push_back(std::make_unique<VerifyCommand>());
  commands.back()->Add(&app);

  // flatten
  commands.push_back(std::make_unique<FlattenCommand>());
  commands.back()->Add(&app);

  // send
  commands.push_back(std::make_unique<SendCommand>());
  commands.back()->Add(&app);

  // recv
  commands.push_back(std::make_unique<RecvCommand>());
  commands.back()->Add(&app);

  // keygen
  commands.push_back(std::make_unique<KeygenCommand>());
  commands.back()->Add(&app);

  // gen
  commands.push_back(std::make_unique<GenCommand>());
  commands.back()->Add(&app);

  // criu export-upstream
  CLI::App* criu_cmd = app.add_subcommand("criu", "Work on the CRIU amdgpu plugin's images");
  criu_cmd->require_subcommand(1);
  ExportUpstreamOptions export_upstream;
  RunFlags export_flags;
  bool export_quiet = false;
  CLI::App* export_cmd = criu_cmd->add_subcommand(
      "export-upstream",
      "Convert a CRIU images directory dumped with vramflow's amdgpu plugin into upstream's layout (raw "
      "amdgpu-pages-<id>-<gpu_id>.img files beside the metadata images), so upstream's amdgpu_plugin.so can restore "
      "it. Every stream is verified while it is decoded; files appear only once all are complete");
  export_cmd->add_option("dir", export_upstream.dir, "the CRIU images directory (criu dump -D DIR)")->required();
  export_cmd->add_flag("-f,--force", export_upstream.force, "replace existing amdgpu-pages files");
  export_cmd->add_flag("--remove-streams", export_upstream.remove_streams,
                       "delete the converted amdgpu-vram streams once every pages file is in place (default: keep "
                       "them, so vramflow's plugin still restores from them)");
  export_cmd->add_flag("-q,--quiet", export_quiet, "print nothing on success");
  export_flags.Add(export_cmd);

  // streamer (criu-image-streamer's drop-in)
  commands.push_back(std::make_unique<StreamerCommand>());
  commands.back()->Add(&app);

  // s3 cleanup
  CLI::App* s3_cmd = app.add_subcommand("s3", "Work on S3 state that vramflow left behind");
  s3_cmd->require_subcommand(1);
  std::string s3_journal;
  bool s3_all = false;
  CLI::App* s3_cleanup_cmd = s3_cmd->add_subcommand(
      "cleanup", "Abort the multipart uploads that a killed vramflow left pending (journaled in $XDG_STATE_HOME/"
                 "vramflow/s3-uploads, else ~/.local/state/vramflow/s3-uploads), with the credentials of this "
                 "environment; uploads of running processes are left alone");
  s3_cleanup_cmd->add_option("--journal", s3_journal, "the journal directory (default: as above)");
  s3_cleanup_cmd->add_flag("--all", s3_all, "also abort the uploads of processes still running");
  S3Flags s3_cleanup_s3;
  s3_cleanup_s3.Add(s3_cleanup_cmd, /*encryption=*/false);  // aborting an upload needs no key

  // bench
  CLI::App* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  bench_cmd->require_subcommand(1);
  CodecBenchOptions bench;
  std::string bench_size = "64M", bench_chunk = "1M", bench_kinds, bench_codecs;
  bool bench_no_peers = false;
  CLI::App* bench_codecs_cmd = bench_cmd->add_subcommand(
      "codecs", "Single-core ratio and speed per codec and data kind, beside zstd -1, zstd --fast=1 and lz4 -1");
  bench_codecs_cmd->add_option("-s,--size", bench_size, "bytes per data kind")->capture_default_str()->check(SizeValidator());
  bench_codecs_cmd->add_option("--chunk-size", bench_chunk, "chunk size")->capture_default_str()->check(SizeValidator());
  bench_codecs_cmd->add_option("--kinds", bench_kinds, "comma-separated data kinds (default: all)");
  bench_codecs_cmd->add_option("--codecs", bench_codecs, "comma-separated vramflow codec specs (default: auto,zstd:1,zstd:-1,lz4)");
  bench_codecs_cmd->add_option("--min-seconds", bench.min_seconds, "time per measurement")->capture_default_str();
  bench_codecs_cmd->add_flag("--no-peers", bench_no_peers, "skip the zstd/lz4 command-line tools");
  bench_codecs_cmd->add_option("--json", bench.json_path, "also write results as JSON to this file");
  PipelineBenchOptions pbench;
  DumpFlags pbench_flags;
  std::string pbench_size = "512M";
  bool pbench_no_scaling = false;
  CLI::App* bench_pipeline_cmd = bench_cmd->add_subcommand(
      "pipeline", "Dump and restore throughput of the flow graphs on a simulated GPU process, with 1 thread and with N "
                  "(bench/compare.sh runs this beside pzstd, zstd and lz4)");
  bench_pipeline_cmd->add_option("-g,--gpus", pbench.gpus, "simulated GPUs")->capture_default_str();
  bench_pipeline_cmd->add_option("-s,--size-per-gpu", pbench_size, "VRAM per GPU")->capture_default_str()->check(SizeValidator());
  bench_pipeline_cmd->add_option("--layout", pbench.layout, "model (the demo's BOs) or zeros (one zero-filled BO per GPU)")
      ->capture_default_str();
  bench_pipeline_cmd->add_flag("--no-scaling", pbench_no_scaling, "skip the 1-thread run");
  bench_pipeline_cmd->add_option("--repeat", pbench.repeat, "runs per thread count; the fastest is reported")
      ->capture_default_str();
  bench_pipeline_cmd->add_option("--work-dir", pbench.work_dir, "where the stream is written (default: /dev/shm)");
  bench_pipeline_cmd->add_option("--export-raw", pbench.export_raw, "also write the raw VRAM bytes to this file");
  bench_pipeline_cmd->add_option("--json", pbench.json_path, "also write results as JSON to this file");
  bench_pipeline_cmd
      ->add_option("--dma-cpus", pbench.dma_cpus,
                   "run the simulated rings' copies on these CPUs only (comma-separated); with the bench itself on "
                   "other CPUs (taskset), copies cost the pipeline no CPU, as with SDMA")
      ->delimiter(',');
  pbench_flags.Add(bench_pipeline_cmd);

  // completion (hidden): the shell completion script, from this very tree (tools/cli/shell_completion.h)
  std::string completion_shell;
  CLI::App* completion_cmd = app.add_subcommand("completion", "Print the shell completion script for bash or zsh");
  completion_cmd->group("");
  completion_cmd->add_option("shell", completion_shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));

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

  if (*completion_cmd) {
    std::cout << ShellCompletion(app, "vramflow", completion_shell);
    std::cout.flush();
    return std::cout ? 0 : Fail("completion", Status::IoError("writing the script to stdout"));
  }

  // SIGINT, SIGTERM, SIGHUP: before any thread starts (tools/cli/interrupt.h).
  std::string command_name;
  for (const CLI::App* cmd = &app; !cmd->get_subcommands().empty();) {
    cmd = cmd->get_subcommands().front();
    command_name += (command_name.empty() ? "" : " ") + cmd->get_name();
  }
  Interrupts signal_handling(command_name);
  if (!signal_handling.status().ok()) return Fail(command_name, signal_handling.status());
  interrupts = &signal_handling;
  CleanupRegistry* cleanup = signal_handling.cleanup();
  const std::string journal_dir = s3::DefaultJournalDir(nullptr);
  export_upstream.cleanup = cleanup;
  const CommandContext context{cleanup, journal_dir};
  for (const std::unique_ptr<Command>& command : commands)
    if (command->chosen()) return RunCommand(*command, context);

  if (*export_cmd) {
    Status s = export_flags.Resolve(&export_upstream.pipeline);
    if (s.ok()) s = RefuseDash("DIR", export_upstream.dir);
    if (!s.ok()) return UsageError("criu export-upstream", s);
    ExportUpstreamReport report;
    s = RunExportUpstream(export_upstream, &report);
    if (!s.ok()) return Fail("criu export-upstream", s);
    if (!export_quiet) {
      for (const ExportedGpu& gpu : report.gpus) {
        if (gpu.written)
          std::fprintf(stderr, "wrote %s: %llu BO(s), %s, from %s (verified)\n", gpu.pages.c_str(),
                       static_cast<unsigned long long>(gpu.bos), FormatSize(gpu.bytes).c_str(), gpu.stream.c_str());
        else
          std::fprintf(stderr, "kept %s: no stream for GPU 0x%x, the pages file was there already (not checked)\n",
                       gpu.pages.c_str(), gpu.gpu_id);
      }
      for (const std::string& stream : report.removed) std::fprintf(stderr, "removed %s\n", stream.c_str());
      std::fprintf(stderr, "upstream's amdgpu_plugin.so can now restore %s (the metadata images are upstream's "
                           "already)\n", export_upstream.dir.c_str());
    }
    return 0;
  }
  if (*bench_pipeline_cmd) {
    Status s = pbench_flags.Resolve(&pbench.pipeline);
    if (s.ok()) s = RefuseDash("--json", pbench.json_path);
    if (s.ok()) s = RefuseDash("--work-dir", pbench.work_dir);
    if (s.ok()) s = RefuseDash("--export-raw", pbench.export_raw);
    if (!s.ok()) return UsageError("bench pipeline", s);
    pbench.bytes_per_gpu = ParseSize(pbench_size).value();
    pbench.single_thread_too = !pbench_no_scaling;
    s = RunPipelineBench(pbench, std::cout);
    std::cout.flush();
    return s.ok() ? 0 : Fail("bench pipeline", s);
  }
  if (*s3_cleanup_cmd) {
    const std::string dir = s3_journal.empty() ? journal_dir : s3_journal;
    if (dir.empty())
      return UsageError("s3 cleanup", Status::InvalidArgument("neither XDG_STATE_HOME nor HOME is set: give --journal"));
    S3Options s3_options;
    if (Status resolved = s3_cleanup_s3.Resolve(&s3_options); !resolved.ok())
      return UsageError("s3 cleanup", resolved);
    s3_options.cleanup = cleanup;  // an interrupt kills a credential_process
    s3::CleanupReport report = s3::AbortJournaledUploads(dir, s3_options, s3_all);
    std::fprintf(stderr, "vramflow s3 cleanup: aborted %u upload(s); %u of running processes left alone (%s)\n",
                 report.aborted, report.skipped, dir.c_str());
    for (const std::string& failure : report.failures)
      std::fprintf(stderr, "vramflow s3 cleanup: not aborted: %s\n", failure.c_str());
    return report.failures.empty() ? 0 : kExitFailure;
  }
  if (*bench_codecs_cmd) {
    if (Status s = RefuseDash("--json", bench.json_path); !s.ok()) return UsageError("bench codecs", s);
    bench.size = ParseSize(bench_size).value();
    uint64_t chunk = ParseSize(bench_chunk).value();
    if (chunk == 0 || chunk > (64u << 20))
      return UsageError("bench codecs", Status::InvalidArgument("--chunk-size must be 1 .. 64M"));
    bench.chunk_size = static_cast<uint32_t>(chunk);
    bench.peers = !bench_no_peers;
    if (!bench_kinds.empty()) {
      bench.kinds.clear();
      for (const std::string& k : CLI::detail::split(bench_kinds, ',')) {
        std::optional<DataKind> kind = ParseDataKind(k);
        if (!kind) return UsageError("bench codecs", Status::InvalidArgument("unknown data kind '" + k + "'"));
        bench.kinds.push_back(*kind);
      }
    }
    if (!bench_codecs.empty()) bench.codecs = CLI::detail::split(bench_codecs, ',');
    std::vector<CodecBenchRow> rows;
    Status s = RunCodecBench(bench, std::cout, &rows);
    return s.ok() ? 0 : Fail("bench codecs", s);
  }
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
