// SPDX-License-Identifier: MIT
#include "plugin/plugin_options.h"

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "common/units.h"
#include "streamer/pipeline_fit.h"
#include "transport/net/shared_key.h"
#include "transport/s3/s3_encryption.h"

namespace vramflow {
namespace {

struct CheckSwitch {
  const char* variable;
  bool MapChecks::*check;
};
constexpr CheckSwitch kCheckSwitches[] = {
    {"KFD_FW_VER_CHECK", &MapChecks::fw_version},         {"KFD_SDMA_FW_VER_CHECK", &MapChecks::sdma_fw_version},
    {"KFD_CACHES_COUNT_CHECK", &MapChecks::caches_count}, {"KFD_NUM_GWS_CHECK", &MapChecks::num_gws},
    {"KFD_VRAM_SIZE_CHECK", &MapChecks::vram_size},       {"KFD_NUMA_CHECK", &MapChecks::numa},
    {"KFD_CAPABILITY_CHECK", &MapChecks::capability},
};

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Ignored(const char* name, const char* value, const std::string& why) {
  return std::string("ignoring ") + name + "='" + value + "': " + why;
}

// Upstream's getenv_bool: "0" or "no" (any case) is false, "1" or "yes" is
// true. Nothing else, so that a value means the same to both plugins:
// "false" or "off" is not read as false (the check would stay on for
// upstream's plugin, and does here too, with a warning).
std::optional<bool> ParseUpstreamBool(const char* value) {
  if (std::strcmp(value, "0") == 0 || ::strcasecmp(value, "no") == 0) return false;
  if (std::strcmp(value, "1") == 0 || ::strcasecmp(value, "yes") == 0) return true;
  return std::nullopt;
}

std::optional<Tristate> ParseTristate(const char* value) {
  std::string v = Lower(value);
  if (v == "auto") return Tristate::kAuto;
  if (v == "0" || v == "no" || v == "false" || v == "off") return Tristate::kOff;
  if (v == "1" || v == "yes" || v == "true" || v == "on") return Tristate::kOn;
  return std::nullopt;
}

// Upstream's getenv_size_t: strtoul in base 0 (decimal, 0x hex, 0 octal),
// then an optional k/K (KiB), M (MiB) or G (GiB). Upstream ignores whatever
// follows the suffix; so does this, naming it in `*note` unless it is the
// "B" or "iB" of "64MB" or "64MiB". A minus sign, which strtoul would wrap
// to a huge number, is refused: upstream asks for a positive integer.
std::optional<uint64_t> ParseUpstreamSize(const char* value, std::string* why, std::string* note) {
  const char* p = value;
  while (std::isspace(static_cast<unsigned char>(*p))) ++p;
  if (*p == '-') {
    *why = "expecting a positive integer";
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long n = std::strtoul(value, &end, 0);
  if (end == value || errno != 0) {
    *why = "expecting a positive integer";
    return std::nullopt;
  }
  int shift = 0;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      *why = std::string("invalid size suffix '") + end + "', expecting k/K, M or G";
      return std::nullopt;
  }
  if (shift != 0 && end[1] != '\0' && std::strcmp(end + 1, "B") != 0 && std::strcmp(end + 1, "iB") != 0) {
    *note = std::string("'") + (end + 1) + "' after the suffix ignored, as upstream does";
  }
  if (static_cast<uint64_t>(n) > (UINT64_MAX >> shift)) {
    *why = "exceeds 2^64 bytes";
    return std::nullopt;
  }
  return static_cast<uint64_t>(n) << shift;
}

void ReadBufferSize(const char* v, PluginOptions* options) {
  std::string why, note;
  std::optional<uint64_t> size = ParseUpstreamSize(v, &why, &note);
  if (!size) {
    options->warnings.push_back(Ignored("KFD_MAX_BUFFER_SIZE", v, why));
    return;
  }
  if (!note.empty()) options->warnings.push_back(std::string("KFD_MAX_BUFFER_SIZE='") + v + "': " + note);
  // 0 is upstream's "no cap": vramflow fits its budget to the machine then.
  if (*size == 0) return;
  if (*size < kMinPluginBudget) {
    options->warnings.push_back(std::string("KFD_MAX_BUFFER_SIZE='") + v + "' (" + FormatSize(*size) +
                                ") is below the " + FormatSize(kMinPluginBudget) + " the pipeline needs; using " +
                                FormatSize(kMinPluginBudget));
    *size = kMinPluginBudget;
  }
  options->pipeline.max_memory = *size;
}

void ReadCodec(const char* v, PluginOptions* options) {
  EncoderOptions encoder = options->pipeline.encoder;  // a failed parse may have set part of it
  Status s = ParseCodecSpec(v, &encoder);
  if (s.ok()) {
    options->pipeline.encoder = encoder;
  } else {
    options->warnings.push_back(Ignored("VRAMFLOW_CODEC", v, s.message()));
  }
}

void ReadThreads(const char* v, PluginOptions* options) {
  char* end = nullptr;
  errno = 0;
  unsigned long n = std::strtoul(v, &end, 10);
  if (!std::isdigit(static_cast<unsigned char>(*v)) || *end != '\0' || errno != 0 || n > 1024) {
    options->warnings.push_back(
        Ignored("VRAMFLOW_THREADS", v, "not a thread count 0..1024 (0 = the CPUs this process may use)"));
    return;
  }
  options->pipeline.threads = static_cast<unsigned>(n);
}

void ReadKeyFile(const char* v, PluginOptions* options) {
  Result<SharedKey> key = LoadKeyFile(v);
  if (key.ok()) {
    options->transport.net.tls.key = std::move(*key);
    return;
  }
  options->key_error = key.status().WithContext("VRAMFLOW_KEY_FILE");
  options->warnings.push_back(Ignored("VRAMFLOW_KEY_FILE", v, key.status().message()) +
                              " (a network VRAMFLOW_TARGET will be refused)");
}

void ReadSseCKeyFile(const char* v, PluginOptions* options) {
  Result<std::string> key = s3::LoadCustomerKey(v);
  if (key.ok()) {
    options->transport.s3.encryption.customer_key = std::move(*key);
    return;
  }
  options->sse_c_key_error = key.status().WithContext("VRAMFLOW_S3_SSE_C_KEY_FILE");
  options->warnings.push_back(Ignored("VRAMFLOW_S3_SSE_C_KEY_FILE", v, key.status().message()) +
                              " (an s3:// VRAMFLOW_TARGET or VRAMFLOW_BASE will be refused)");
}

void ReadChecks(const std::function<const char*(const char*)>& getenv, PluginOptions* options) {
  for (const CheckSwitch& sw : kCheckSwitches) {
    const char* v = getenv(sw.variable);
    if (v == nullptr || *v == '\0') continue;
    if (std::optional<bool> on = ParseUpstreamBool(v)) {
      options->checks.*sw.check = *on;
    } else {
      options->warnings.push_back(Ignored(sw.variable, v, "expecting 1/YES or 0/NO; the check stays on"));
    }
  }
}

void ReadTristate(const char* name, const char* v, Tristate* out, std::vector<std::string>* warnings) {
  if (v == nullptr || *v == '\0') return;
  if (std::optional<Tristate> t = ParseTristate(v)) {
    *out = *t;
  } else {
    warnings->push_back(Ignored(name, v, "expecting auto, 1/yes/true/on or 0/no/false/off; auto"));
  }
}

const char* TristateName(Tristate t) {
  switch (t) {
    case Tristate::kAuto:
      return "auto";
    case Tristate::kOff:
      return "0";
    case Tristate::kOn:
      return "1";
  }
  return "?";
}

}  // namespace

Result<PluginOptions> PluginOptionsFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  PluginOptions options;
  options.pipeline.max_memory = 0;  // fit to the machine unless KFD_MAX_BUFFER_SIZE says otherwise
  auto set = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return (v && *v) ? v : nullptr;
  };

  if (const char* v = set("KFD_MAX_BUFFER_SIZE")) ReadBufferSize(v, &options);
  if (const char* v = set("VRAMFLOW_CODEC")) ReadCodec(v, &options);
  if (const char* v = set("VRAMFLOW_THREADS")) ReadThreads(v, &options);
  if (const char* v = set("VRAMFLOW_TARGET")) options.target = v;
  if (const char* v = set("VRAMFLOW_BASE")) options.base = v;
  if (const char* v = set("VRAMFLOW_BASE_REFS_ONLY")) {
    if (std::optional<bool> on = ParseUpstreamBool(v)) {
      options.pipeline.base_refs_only = *on;
    } else {
      options.warnings.push_back(Ignored("VRAMFLOW_BASE_REFS_ONLY", v, "expecting 1/YES or 0/NO; deltas stay allowed"));
    }
  }
  if (const char* v = set("VRAMFLOW_KEY_FILE")) ReadKeyFile(v, &options);
  // Mutual TLS for a tcp:// target (docs/PLUGIN.md); TlsContext::Create
  // checks the files when the transport opens.
  if (const char* v = set("VRAMFLOW_TLS_CERT")) options.transport.net.tls.cert_file = v;
  if (const char* v = set("VRAMFLOW_TLS_KEY")) options.transport.net.tls.key_file = v;
  if (const char* v = set("VRAMFLOW_TLS_CA")) options.transport.net.tls.ca_file = v;
  if (const char* v = set("VRAMFLOW_INSECURE")) {
    if (std::optional<bool> on = ParseUpstreamBool(v)) {
      options.transport.net.insecure = *on;
    } else {
      options.warnings.push_back(Ignored("VRAMFLOW_INSECURE", v, "expecting 1/YES or 0/NO; TLS stays required"));
    }
  }
  // Server-side encryption of s3:// targets and bases (docs/S3.md,
  // "Encryption"); the modes are checked when the transport opens.
  if (const char* v = set("VRAMFLOW_S3_SSE")) options.transport.s3.encryption.sse = v;
  if (const char* v = set("VRAMFLOW_S3_SSE_KMS_KEY_ID")) options.transport.s3.encryption.kms_key_id = v;
  if (const char* v = set("VRAMFLOW_S3_SSE_C_KEY_FILE")) {
    options.sse_c_key_file = v;
    ReadSseCKeyFile(v, &options);
  }
  ReadChecks(getenv, &options);
  const char* topology = set("VRAMFLOW_KFD_TOPOLOGY");
  options.topology_root = topology ? topology : kKfdTopologyRoot;
  ReadTristate("VRAMFLOW_PARALLEL_RESTORE", getenv("VRAMFLOW_PARALLEL_RESTORE"), &options.parallel_restore,
               &options.warnings);
  ReadTristate("VRAMFLOW_CRIU_STREAM", getenv("VRAMFLOW_CRIU_STREAM"), &options.criu_stream, &options.warnings);
  options.pipeline.producer = "vramflow amdgpu_plugin";
  // A restore listening on a network VRAMFLOW_TARGET gives up on a sender
  // that never comes, instead of holding CRIU for ever.
  options.transport.accept_timeout = std::chrono::minutes(10);
  return options;
}

std::vector<std::string> PluginOptions::ParamLines() const {
  std::vector<std::string> lines;
  auto param = [&](const char* name, const std::string& value) {
    lines.push_back(std::string("param: ") + name + ": " + value);
  };
  // What 0s mean on this machine now (a graph reads the limits again when it runs).
  const PipelineOptions fitted = WithMachineDefaults(pipeline);
  param("KFD_MAX_BUFFER_SIZE", pipeline.max_memory
                                   ? Hex(pipeline.max_memory) + " (" + FormatSize(pipeline.max_memory) + ")"
                                   : "0 (auto: " + FormatSize(fitted.max_memory) + ")");
  for (const CheckSwitch& sw : kCheckSwitches) param(sw.variable, checks.*sw.check ? "Y" : "N");
  param("VRAMFLOW_CODEC", DescribeOptions(pipeline.encoder));
  param("VRAMFLOW_THREADS",
        pipeline.threads == 0 ? "0 (auto: " + std::to_string(fitted.threads) + ")" : std::to_string(pipeline.threads));
  param("VRAMFLOW_TARGET", target.empty() ? "(the images directory)" : target);
  param("VRAMFLOW_BASE", base.empty() ? "(none: full dumps)" : base);
  param("VRAMFLOW_BASE_REFS_ONLY", pipeline.base_refs_only ? "Y" : "N");
  const TlsCredentials& tls = transport.net.tls;
  auto file = [](const std::string& path) { return path.empty() ? std::string("(none)") : path; };
  param("VRAMFLOW_TLS_CERT", file(tls.cert_file));
  param("VRAMFLOW_TLS_KEY", file(tls.key_file));
  param("VRAMFLOW_TLS_CA", file(tls.ca_file));
  param("VRAMFLOW_INSECURE", transport.net.insecure ? "Y" : "N");
  param("VRAMFLOW_KEY_FILE", tls.key ? tls.key->origin : !key_error.ok() ? "(unusable)" : "(none)");
  const S3Encryption& sse = transport.s3.encryption;
  param("VRAMFLOW_S3_SSE", sse.sse.empty() ? "(as the bucket says)" : sse.sse);
  param("VRAMFLOW_S3_SSE_KMS_KEY_ID", sse.kms_key_id.empty() ? "(none)" : sse.kms_key_id);
  param("VRAMFLOW_S3_SSE_C_KEY_FILE", !sse.customer_key.empty() ? sse_c_key_file
                                      : !sse_c_key_error.ok()   ? "(unusable)"
                                                                : "(none)");
  param("VRAMFLOW_PARALLEL_RESTORE", TristateName(parallel_restore));
  param("VRAMFLOW_CRIU_STREAM", TristateName(criu_stream));
  param("VRAMFLOW_KFD_TOPOLOGY", topology_root);
  return lines;
}

}  // namespace vramflow
