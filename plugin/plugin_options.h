// SPDX-License-Identifier: MIT
// PluginOptions: the CRIU plugin's settings, read from the environment once
// at plugin init, in the style of upstream's plugin (KFD_MAX_BUFFER_SIZE,
// KFD_*_CHECK) plus vramflow's own VRAMFLOW_* variables. docs/PLUGIN.md
// lists them.
//
// No value is fatal. CRIU initialises every plugin in its plugin directory
// for every dump and restore on the host, GPU or not, so an init that fails
// over a typo would stop them all. As upstream's getenv_bool and
// getenv_size_t do, a value that does not parse is reported (a line in
// `warnings`, for the plugin to log) and the default is kept.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "plugin/gpu_map.h"
#include "streamer/pipeline.h"
#include "transport/open_uri.h"

namespace vramflow {

enum class Tristate { kAuto, kOff, kOn };

// The smallest KFD_MAX_BUFFER_SIZE the pipeline works in (a few 1 MiB chunks
// in flight); a smaller nonzero value is raised to it.
inline constexpr uint64_t kMinPluginBudget = 16ull << 20;

struct PluginOptions {
  // Codec (VRAMFLOW_CODEC), threads (VRAMFLOW_THREADS) and the memory budget
  // (KFD_MAX_BUFFER_SIZE: every buffer of the data path together). Unset or
  // 0, threads and budget stay 0: each graph fits them to the machine it runs
  // on (streamer/pipeline_fit.h).
  PipelineOptions pipeline;
  // VRAMFLOW_TARGET: where VRAM streams go instead of the images directory
  // (a directory, or a transport URI; "{name}" in it becomes the stream's
  // name). Empty: the images directory, next to the metadata images.
  std::string target;
  // VRAMFLOW_BASE: the earlier checkpoint each GPU's VRAM stream is built on
  // (an incremental dump; docs/PLUGIN.md), a pattern as VRAMFLOW_TARGET is
  // (ImageLocation in image_store.h): at dump, each stream is coded against
  // the stream of the same name there; at restore, that stream is the base
  // the BASE frame's id must match. Empty: full dumps, and a restore opens
  // an incremental stream's base where its BASE frame says.
  std::string base;
  // VRAMFLOW_BASE_REFS_ONLY (pipeline.base_refs_only): match against the
  // base's digests, reading only the base chunks that become references,
  // to prove them (no deltas).
  TransportOptions transport;  // key from VRAMFLOW_KEY_FILE
  MapChecks checks;            // KFD_*_CHECK
  // VRAMFLOW_KFD_TOPOLOGY: where KFD's topology is read (tests, containers).
  std::string topology_root;
  // VRAMFLOW_PARALLEL_RESTORE: fill BOs from the main CRIU process (auto:
  // when this CRIU has the POST_FORKING hook; on without it is refused).
  Tristate parallel_restore = Tristate::kAuto;
  // VRAMFLOW_CRIU_STREAM: images through CRIU's image streamer (auto: when
  // the images directory holds the streamer's socket).
  Tristate criu_stream = Tristate::kAuto;

  // One line per value that was ignored (it did not parse: the default
  // stayed) or adjusted (a budget raised to kMinPluginBudget), naming the
  // variable and the value. The plugin logs them at init.
  std::vector<std::string> warnings;
  // Not OK when VRAMFLOW_KEY_FILE is set but its key cannot be loaded. Init
  // goes on (see the top of this file), but the key is what authenticates
  // and encrypts a network VRAMFLOW_TARGET: the plugin must fail with this
  // status when it is about to use the transport, rather than go on without
  // the key.
  Status key_error;
  // The same for VRAMFLOW_S3_SSE_C_KEY_FILE: without the key, an s3://
  // target would be written unencrypted, and a base there not read.
  Status sse_c_key_error;
  std::string sse_c_key_file;  // VRAMFLOW_S3_SSE_C_KEY_FILE as given, for the log

  // The effective settings, one "param: NAME: VALUE" line per variable (as
  // upstream's "param: KFD_FW_VER_CHECK:Y"), for the plugin's log. Never
  // prints key material.
  std::vector<std::string> ParamLines() const;
};

// Reads every variable through `getenv` (the plugin passes ::getenv). Always
// OK: problems end up in `warnings` and `key_error` (the Result type stays so
// that callers need not change).
Result<PluginOptions> PluginOptionsFromEnvironment(const std::function<const char*(const char*)>& getenv);

}  // namespace vramflow
