// SPDX-License-Identifier: MIT
// Command-line flags shared by vramflow's commands: sizes, the memory budget
// of readers, progress and --json output, threads and budget of the graphs,
// fsync, and how a dump encodes. Each struct adds its options to a CLI11
// command and turns them into the options of the job.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "codecs/chunk_codec.h"
#include "common/progress.h"
#include "common/units.h"
#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline.h"
#include "streamer/pipeline_fit.h"
#include "tools/cli/cli_util.h"

namespace vramflow {

// A size option given as text ("64M"), checked by ParseSize.
inline CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string& text) {
        Result<uint64_t> r = ParseSize(text);
        return r.ok() ? std::string() : r.status().message();
      },
      "SIZE");
}

// -m/--max-memory for the commands that only read a stream (inspect, verify,
// recv): their reader's buffers and records, and a network receive window.
struct MemoryFlag {
  std::string max_memory = "256M";

  void Add(CLI::App* cmd, const std::string& what) {
    cmd->add_option("-m,--max-memory", max_memory, "memory budget for " + what)
        ->capture_default_str()
        ->check(SizeValidator());
  }
  uint64_t Resolve() const { return ParseSize(max_memory).value(); }  // checked by SizeValidator
};

// What a long job prints: --progress on stderr, -q, and (where the command
// has one) the --json report on stdout instead of the text summary.
struct OutputFlags {
  std::string progress = "auto";
  double interval_s = 5;
  bool quiet = false;
  bool json = false;

  void Add(CLI::App* cmd, bool with_json) {
    cmd->add_option("--progress", progress,
                    "auto (a bar on a terminal, else lines), bar, lines (one line every --progress-interval seconds "
                    "with bytes, rate and ETA, for logs) or none")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
    cmd->add_option("--progress-interval", interval_s, "seconds between two --progress=lines lines")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_flag("-q,--quiet", quiet, "no progress and no summary (errors still go to stderr)");
    if (with_json)
      cmd->add_flag("--json", json,
                    "print one JSON object on stdout at the end (schema_version, objects, raw_bytes, stream_bytes, "
                    "seconds, ...; on failure ok: false, exit_code and error) instead of the text summary");
  }
  ProgressStyle Style() const {
    if (quiet) return ProgressStyle();
    return ProgressStyle(ParseProgressMode(progress).value_or(ProgressStyle::Mode::kNone),
                         std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000)));
  }
  bool summary() const { return !quiet && !json; }
  // --json needs stdout to itself.
  Status CheckStdout(const std::string& output) const {
    if (json && output == "-")
      return Status::InvalidArgument("--json prints its report on stdout, where -o - writes the data: drop one");
    return Status::Ok();
  }
};

// How the graphs run: threads and the memory budget. Left at 0 / auto, both
// fit the machine (streamer/pipeline_fit.h); a graph whose budget cannot feed
// its threads runs fewer and says so on stderr.
struct RunFlags {
  unsigned threads = 0;
  std::string max_memory = "auto";
  double dma_timeout_s = 30;
  std::string command;

  void Add(CLI::App* cmd) {
    command = cmd->get_name();
    cmd->add_option("-j,--threads", threads,
                    "worker threads (0: the CPUs this process may use: affinity mask and cgroup CPU quota)")
        ->capture_default_str();
    cmd->add_option("-m,--max-memory", max_memory,
                    "memory budget for every buffer of the pipeline (staging, encoded and I/O buffers, codec state); "
                    "auto: 256M or more with many threads, at most a quarter of the available memory and of the "
                    "cgroup's limit")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& text) {
              if (text == "auto") return std::string();
              Result<uint64_t> r = ParseSize(text);
              return r.ok() ? std::string() : r.status().message();
            },
            "SIZE|auto"));
    cmd->add_option("--dma-timeout", dma_timeout_s, "seconds to wait for one DMA copy before giving up")
        ->capture_default_str();
  }
  // Call after the chunk size and codec are set: the defaults depend on them.
  Status Resolve(PipelineOptions* options) const {
    options->threads = threads;
    if (max_memory == "auto") {
      options->max_memory = 0;
    } else {
      VF_ASSIGN_OR_RETURN(options->max_memory, ParseSize(max_memory));
      if (options->max_memory == 0) return Status::InvalidArgument("--max-memory must be more than 0 (or auto)");
    }
    if (dma_timeout_s <= 0) return Status::InvalidArgument("--dma-timeout must be positive");
    options->dma_timeout = std::chrono::milliseconds(static_cast<int64_t>(dma_timeout_s * 1000));
    ResolveMachineDefaults(options, ReadMachineLimits());
    options->note = [name = command](const std::string& line) {
      std::fprintf(stderr, "vramflow %s: note: %s\n", name.c_str(), line.c_str());
    };
    return Status::Ok();
  }
};

// --fsync and --no-fsync: whether a command makes its output durable before
// it reports success. The default is on where a sender is told the data is
// safe (recv, unpack from the network), off elsewhere.
struct FsyncFlags {
  bool on = false;
  bool off = false;

  void Add(CLI::App* cmd, const std::string& default_text) {
    CLI::Option* yes = cmd->add_flag("--fsync", on,
                                     "make the output durable (fsync files and directories) before "
                                     "reporting success (default: " +
                                         default_text + ")");
    CLI::Option* no = cmd->add_flag("--no-fsync", off, "do not fsync the output");
    yes->excludes(no);
  }
  bool Resolve(bool default_on) const { return on || (default_on && !off); }
};

// How a dump encodes: codec, transform, chunk size, dedup; plus RunFlags.
struct DumpFlags {
  std::string codec = "auto";
  std::string transform;  // empty: auto for the auto codec, none otherwise
  std::string chunk_size = "1M";
  bool no_dedup = false;
  uint32_t dedup_window = 0;
  RunFlags run;

  void Add(CLI::App* cmd) {
    cmd->add_option("-c,--codec", codec,
                    "auto (per-chunk choice: zero runs, raw, zstd, byte-grouped planes with Huffman), raw, lz4, zstd, "
                    "zstd:LEVEL (negative levels are faster), huffman, auto:LEVEL (zstd level used by auto)")
        ->capture_default_str();
    cmd->add_option("-t,--transform", transform,
                    "byte grouping / bit planes: auto (detect 2/4-byte words and the smallest plane layout per chunk, "
                    "or fp8), auto-fast, none, bytegroup2 (bf16/fp16), bytegroup4 (fp32), signplanes1 (fp8), "
                    "bitplanes2rR / bitplanes4rR (R 1..7); "
                    "default: auto with --codec auto, none otherwise");
    cmd->add_option("--chunk-size", chunk_size, "raw bytes per chunk (max 64M)")
        ->capture_default_str()
        ->check(SizeValidator());
    cmd->add_flag("--no-dedup", no_dedup, "write identical chunks in full instead of as references");
    cmd->add_option("--dedup-window", dedup_window,
                    "how many of the latest distinct chunks a reference may name; each costs up to 96 bytes on both "
                    "sides (default: 65536, less if that takes more than 1/8 of --max-memory)")
        ->check(CLI::Range(1u, kMaxDedupWindow));
    run.Add(cmd);
  }
  Status Resolve(PipelineOptions* options) const {
    VF_RETURN_IF_ERROR(ParseCodecSpec(codec, &options->encoder));
    std::string t = transform.empty() ? (options->encoder.codec == CodecChoice::kAuto ? "auto" : "none") : transform;
    VF_RETURN_IF_ERROR(ParseTransformSpec(t, &options->encoder));
    VF_ASSIGN_OR_RETURN(uint64_t size, ParseSize(chunk_size));
    if (size == 0 || size > (64u << 20)) return Status::InvalidArgument("--chunk-size must be 1 .. 64M");
    options->chunk_size = static_cast<uint32_t>(size);
    options->dedup = !no_dedup;
    options->dedup_window = dedup_window;
    return run.Resolve(options);
  }
};

}  // namespace vramflow
