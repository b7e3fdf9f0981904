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
#include "tools/demo.h"
#include "tools/flatten_command.h"
#include "tools/cli/exit_codes.h"
#include "tools/cli/exit_status.h"
#include "tools/inspect_command.h"
#include "tools/pipeline_bench.h"
#include "tools/cli/interrupt.h"
#include "tools/json_report.h"
#include "tools/pack_command.h"
#include "tools/receive_dir.h"
#include "tools/cli/shell_completion.h"
#include "tools/streamer_command.h"
#include "tools/transfer.h"
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
  DemoOptions demo;
  DumpFlags demo_flags;
  std::string demo_size = "1G";
  bool demo_quiet = false;
  std::string demo_progress = "auto";
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Dump a simulated GPU process (model-like BOs on several simulated GPUs) through the pipeline, restore it "
              "into fresh simulated GPUs and check every byte");
  demo_cmd->add_option("-g,--gpus", demo.gpus, "simulated GPUs")->capture_default_str();
  demo_cmd->add_option("-s,--size", demo_size, "VRAM per GPU")->capture_default_str()->check(SizeValidator());
  demo_cmd->add_option("--rings", demo.rings, "simulated SDMA rings per GPU")->capture_default_str();
  demo_cmd->add_option("--to", demo.destination,
                       "where the stream goes: a file or s3://BUCKET/KEY (kept, read back and restored here), or "
                       "tcp://HOST:PORT / unix:PATH where `vramflow demo --listen` restores it (default: a temporary "
                       "file, removed)");
  demo_cmd->add_option("--listen", demo.listen,
                       "be the receiving end: restore a stream sent by `demo --to` into fresh simulated GPUs (same "
                       "--gpus and --size) as it arrives, and check every byte");
  demo_cmd->add_option("--base-store", demo.base_store,
                       "with --listen: earlier streams the sender may build its stream on, offered to it");
  demo_cmd->add_flag("--base", demo.incremental,
                     "an incremental checkpoint: a full checkpoint, a simulated training step (low mantissa bits of "
                     "fp32 weights and Adam state change, activations and scratch are rewritten, bf16 weights stay), "
                     "then a checkpoint against the first, restored with it and checked; prints both (not with --to "
                     "or --listen)");
  demo_cmd->add_flag("--json", demo.json, "print the results as JSON");
  demo_cmd->add_flag("-f,--force", demo.force, "with --to: overwrite an existing file or S3 object");
  demo_cmd->add_flag("-q,--quiet", demo_quiet, "no progress (as --progress none)");
  demo_cmd
      ->add_option("--progress", demo_progress,
                   "auto (a bar on a terminal, else lines), bar, lines (a line every 5 s, for logs) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  demo_flags.Add(demo_cmd);
  TransportFlags demo_net;
  demo_net.Add(demo_cmd, /*sending=*/true, /*receiving=*/true);

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
  TransferOptions send;
  TransportFlags send_net;
  bool send_force = false;
  OutputFlags send_out;
  FsyncFlags send_fsync;
  std::string send_name;
  CLI::App* send_cmd = app.add_subcommand(
      "send", "Send a stream as it is from SRC to DEST, typically a file to a `vramflow recv` on another host. "
              "Succeeds only once the receiver has stored the whole stream");
  send_cmd->add_option("source", send.source, "a file, - (stdin), fd:N or s3://BUCKET/KEY")->required();
  send_cmd->add_option("destination", send.sink,
                       "tcp://HOST:PORT or unix:PATH (connects to a receiver there), s3://BUCKET/KEY, or any other "
                       "sink URI (a file, - for stdout, fd:N)")
      ->required();
  send_out.Add(send_cmd, /*with_json=*/true);
  send_cmd->add_flag("-f,--force", send_force, "overwrite an existing destination file or S3 object");
  send_cmd->add_option("--name", send_name,
                       "name the stream (network destinations): `recv --output-dir` stores it under this name");
  send_fsync.Add(send_cmd, "off; to a receiver, the receiver's own setting counts");
  send_net.Add(send_cmd, /*sending=*/true, /*receiving=*/false);

  // recv
  TransferOptions recv;
  TransportFlags recv_net;
  bool recv_force = false;
  OutputFlags recv_out;
  FsyncFlags recv_fsync;
  std::string recv_dir;
  unsigned recv_count = 0;
  CLI::App* recv_cmd = app.add_subcommand(
      "recv", "Receive a stream from a sender (send, pack --to, demo --to, the plugin) and store it at -o OUT, or "
              "streams one after another into --output-dir DIR, each under the name its sender gave it (the plugin "
              "names each GPU's stream after its image). Output appears only once a whole stream has arrived; other "
              "senders are refused while one is active. "
              "(To restore as it arrives instead, give the address to `unpack` or `demo --listen`.)");
  recv_cmd->add_option("--listen", recv.source, "address to listen on: tcp://HOST:PORT (HOST may be empty) or unix:PATH")
      ->required();
  CLI::Option* recv_output =
      recv_cmd->add_option("-o,--output", recv.sink, "where to store the stream: a file, - (stdout), fd:N, s3://BUCKET/KEY");
  CLI::Option* recv_dir_option = recv_cmd->add_option(
      "-d,--output-dir", recv_dir,
      "take streams one after another and store each in this existing directory under the name its sender gave it");
  recv_output->excludes(recv_dir_option);
  std::string recv_base_store;
  recv_cmd->add_option("--base-store", recv_base_store,
                       "earlier streams a sender may build its stream on, offered to it (default with --output-dir: "
                       "that directory)");
  recv_cmd->add_option("--count", recv_count, "with --output-dir: stop after storing N streams (default: at SIGINT/SIGTERM)")
      ->needs(recv_dir_option)
      ->check(CLI::PositiveNumber);
  recv_cmd->add_flag("-f,--force", recv_force, "overwrite an existing output file or S3 object");
  recv_fsync.Add(recv_cmd, "on: the sender is told DONE only once the stream is durable");
  recv_out.Add(recv_cmd, /*with_json=*/true);
  recv_net.Add(recv_cmd, /*sending=*/false, /*receiving=*/true);
  MemoryFlag recv_memory;
  recv_memory.Add(recv_cmd, "the receive window (a quarter, at most 64M) and the verification of the stream");

  // keygen
  std::string keygen_output;
  CLI::App* keygen_cmd = app.add_subcommand(
      "keygen", "Write a new random shared key (for --key-file / VRAMFLOW_KEY_FILE); copy it to the other host securely");
  keygen_cmd->add_option("-o,--output", keygen_output, "key file to create (mode 0600; never overwritten), or - for stdout")
      ->required();

  // gen
  std::string gen_kind = "bf16", gen_size = "64M", gen_output;
  uint64_t gen_seed = 1;
  CLI::App* gen_cmd = app.add_subcommand("gen", "Write model-like test data (see docs/DATA.md)");
  gen_cmd->add_option("-k,--kind", gen_kind, "fp32, bf16, fp16, fp8, adam-m, adam-v, zeros or random")->capture_default_str();
  gen_cmd->add_option("-s,--size", gen_size, "bytes to write")->capture_default_str()->check(SizeValidator());
  gen_cmd->add_option("--seed", gen_seed, "seed; same seed, same bytes")->capture_default_str();
  uint32_t gen_step = 0;
  gen_cmd->add_option("--step", gen_step,
                      "the training state after this many AdamW steps (fp32, bf16, fp16, adam-m, adam-v; 0: as generated)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 100000u));
  gen_cmd->add_option("-o,--output", gen_output, "file to write; - for stdout; s3://BUCKET/KEY")->required();
  bool gen_force = false;
  gen_cmd->add_flag("-f,--force", gen_force, "overwrite an existing output file or S3 object");
  S3Flags gen_s3;
  gen_s3.Add(gen_cmd);

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
  auto interruptible = [&](TransportOptions* options) {
    options->file.cleanup = cleanup;
    options->net.cleanup = cleanup;
    options->s3.cleanup = cleanup;
    options->s3.journal_dir = journal_dir;
  };
  for (TransportOptions* options : {&demo.transport, &send.transport, &recv.transport})
    interruptible(options);
  export_upstream.cleanup = cleanup;
  const CommandContext context{cleanup, journal_dir};
  for (const std::unique_ptr<Command>& command : commands)
    if (command->chosen()) return RunCommand(*command, context);

  if (*demo_cmd) {
    if (demo.json) JsonCommand() = "demo";
    Status s = demo_flags.Resolve(&demo.pipeline);
    if (s.ok() && !demo.listen.empty()) s = CheckListenUri(demo.listen);
    if (s.ok() && !demo.destination.empty()) s = CheckWriteUri(demo.destination);
    if (s.ok() && demo.destination == "-")
      s = Status::InvalidArgument("--to -: demo reads its stream back to restore it; give a file, s3:// or a receiver");
    if (s.ok() && demo.incremental && (!demo.listen.empty() || !demo.destination.empty()))
      s = Status::InvalidArgument("--base keeps both checkpoints here, in temporary files: it does not combine with "
                                  "--to or --listen");
    if (s.ok()) s = demo_net.Resolve(&demo.transport);
    if (!s.ok()) return UsageError("demo", s);
    if (!demo.destination.empty()) s = CheckDestination(demo.destination, demo.force);
    if (s.ok() && (!demo.listen.empty() || !demo.destination.empty())) s = demo_net.LoadCredentials(&demo.transport);
    if (!s.ok()) return Fail("demo", s);
    demo.bytes_per_gpu = ParseSize(demo_size).value();
    demo.progress = demo_quiet || demo.json ? ProgressStyle()
                                            : ProgressStyle(ParseProgressMode(demo_progress).value_or(
                                                  ProgressStyle::Mode::kNone));
    DemoReport report;
    s = RunDemo(demo, std::cout, &report);
    std::cout.flush();
    return s.ok() ? 0 : Fail("demo", s);
  }
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
  if (*send_cmd || *recv_cmd) {
    const char* name = *send_cmd ? "send" : "recv";
    TransferOptions& options = *send_cmd ? send : recv;
    const OutputFlags& out = *send_cmd ? send_out : recv_out;
    if (out.json) JsonCommand() = name;
    Status s = *send_cmd ? CheckReadUri(send.source, "vramflow recv")
                         : CheckListenUri(recv.source);
    if (s.ok() && !options.sink.empty()) s = CheckWriteUri(options.sink);
    if (s.ok() && *recv_cmd) s = RefuseDash("--output-dir", recv_dir);
    if (s.ok()) s = out.CheckStdout(options.sink);
    if (s.ok()) s = (*send_cmd ? send_net : recv_net).Resolve(&options.transport);
    if (!s.ok()) return UsageError(name, s);
    const bool force = *send_cmd ? send_force : recv_force;
    if (!options.sink.empty()) s = CheckDestination(options.sink, force);
    if (s.ok()) s = (*send_cmd ? send_net : recv_net).LoadCredentials(&options.transport);
    if (!s.ok()) return Fail(name, s);
    options.transport.file.overwrite = force;
    options.transport.s3.overwrite = force;
    options.transport.file.fsync = *send_cmd ? send_fsync.Resolve(false) : recv_fsync.Resolve(/*default_on=*/true);
    const bool quiet = out.quiet;
    options.progress = out.Style();
    if (*recv_cmd) options.max_memory = recv_memory.Resolve();
    if (*send_cmd && !send_name.empty()) {
      Result<Endpoint> endpoint = ParseEndpoint(send.sink);
      if (endpoint.ok() && !endpoint->is_network())
        return UsageError(name, Status::InvalidArgument("--name names a stream sent to tcp:// or unix:, not " + send.sink));
      options.transport.net.name = send_name;
    }
    if (*recv_cmd && !recv_dir.empty()) {
      ReceiveDirOptions dir_options;
      dir_options.listen = recv.source;
      dir_options.dir = recv_dir;
      dir_options.count = recv_count;
      dir_options.transport = options.transport;
      dir_options.progress = out.Style();
      dir_options.notes = !quiet;
      dir_options.max_memory = options.max_memory;
      dir_options.base_store = recv_base_store;
      ReceiveDirReport report;
      s = RunReceiveDirectory(dir_options, &report);
      if (s.ok() && out.json) PrintJson(ReceiveDirJson(report, recv.source, recv_dir));
      if (out.summary() && (s.ok() || report.stored > 0))  // not after a failure to start
        std::fprintf(stderr, "vramflow recv: stored %u stream(s), %s, in %s\n", report.stored,
                     FormatSize(report.bytes).c_str(), recv_dir.c_str());
      return s.ok() ? 0 : Fail(name, s);
    }
    if (*recv_cmd && recv.sink.empty())
      return UsageError(name, Status::InvalidArgument("give -o OUT (one stream) or --output-dir DIR (streams by name)"));
    if (*recv_cmd) {
      // Only once bound (after the output could be opened), with the real port.
      if (!quiet)
        options.transport.on_listening = [](const std::string& uri) {
          std::fprintf(stderr, "vramflow recv: listening on %s\n", uri.c_str());
        };
    }
    if (*recv_cmd) options.base_store = recv_base_store;
    TransferReport report;
    s = RunTransfer(options, *send_cmd ? "send" : "recv", &report);
    if (!s.ok()) return Fail(name, s);
    if (out.json) PrintJson(TransferJson(name, report, options.source, options.sink));
    if (out.summary())
      std::fprintf(stderr, "%s %s %s %s in %.2f s (%s)%s\n", *send_cmd ? "sent" : "received",
                   FormatSize(report.bytes).c_str(), *send_cmd ? "to" : "from",
                   *send_cmd ? send.sink.c_str() : report.peer.c_str(), report.seconds,
                   FormatRate(report.bytes, report.seconds).c_str(),
                   *send_cmd ? "; the receiver stored all of it" : (", stored in " + recv.sink).c_str());
    return 0;
  }
  if (*keygen_cmd) {
    Result<Endpoint> out = ParseEndpoint(keygen_output);
    if (!out.ok()) return UsageError("keygen", out.status());
    if (out->kind != Endpoint::Kind::kPath && out->kind != Endpoint::Kind::kStdio)
      return UsageError("keygen", Status::InvalidArgument("-o '" + keygen_output + "': give a file to create, or - for stdout"));
    Status s = RunKeygen(keygen_output, cleanup);
    if (!s.ok()) return Fail("keygen", s);
    if (keygen_output != "-")
      std::fprintf(stderr, "wrote a new key to %s (keep it secret; both ends need it)\n", keygen_output.c_str());
    return 0;
  }
  if (*gen_cmd) {
    std::optional<DataKind> kind = ParseDataKind(gen_kind);
    if (!kind) return UsageError("gen", Status::InvalidArgument("unknown data kind '" + gen_kind + "'"));
    uint64_t size = ParseSize(gen_size).value();
    if (Status checked = CheckWriteUri(gen_output); !checked.ok()) return UsageError("gen", checked);
    if (Status checked = CheckDestination(gen_output, gen_force); !checked.ok()) return Fail("gen", checked);
    TransportOptions sink_options;  // a file, -, fd:N or s3://BUCKET/KEY
    interruptible(&sink_options);
    sink_options.file.overwrite = gen_force;
    sink_options.s3.overwrite = gen_force;
    sink_options.s3.cleanup = cleanup;  // an interrupt kills a credential_process, aborts the upload
    if (Status resolved = gen_s3.Resolve(&sink_options.s3); !resolved.ok()) return UsageError("gen", resolved);
    if (Status loaded = gen_s3.LoadEncryptionKey(&sink_options.s3); !loaded.ok()) return Fail("gen", loaded);
    Result<std::unique_ptr<ByteSink>> sink = OpenSink(gen_output, sink_options);
    if (!sink.ok()) return Fail("gen", sink.status());
    std::vector<uint8_t> buf(4u << 20);
    for (uint64_t offset = 0; offset < size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - offset));
      GenerateTrainingState(*kind, gen_seed, gen_step, offset, std::span<uint8_t>(buf.data(), n));
      Status s = (*sink)->Write(std::span<const uint8_t>(buf.data(), n));
      if (!s.ok()) return Fail("gen", s);
      offset += n;
    }
    Status s = (*sink)->Commit();
    return s.ok() ? 0 : Fail("gen", s);
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
