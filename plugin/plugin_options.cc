#include "plugin/plugin_options.h"

#include <cctype>
#include <cstdlib>
#include <string_view>

#include "common/units.h"
#include "transport/net_crypto.h"

namespace vramflow {
namespace {

// The smallest budget the pipeline can work in: a few 1 MiB chunks in flight.
constexpr uint64_t kMinBudget = 16ull << 20;

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<Tristate> ParseTristate(const char* name, const char* value) {
  if (value == nullptr || *value == '\0') return Tristate::kAuto;
  std::string v = Lower(value);
  if (v == "auto") return Tristate::kAuto;
  if (v == "0" || v == "no" || v == "false" || v == "off") return Tristate::kOff;
  if (v == "1" || v == "yes" || v == "true" || v == "on") return Tristate::kOn;
  return Status::InvalidArgument(std::string(name) + "='" + value + "': use auto, 1/yes/on or 0/no/off");
}

}  // namespace

Result<PluginOptions> PluginOptionsFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  PluginOptions options;
  auto set = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return (v && *v) ? v : nullptr;
  };

  if (const char* v = set("KFD_MAX_BUFFER_SIZE")) {
    Result<uint64_t> size = ParseSize(v);
    if (!size.ok()) return size.status().WithContext("KFD_MAX_BUFFER_SIZE");
    // 0 is upstream's "no cap": vramflow keeps its default budget then.
    if (*size != 0) {
      if (*size < kMinBudget)
        return Status::InvalidArgument("KFD_MAX_BUFFER_SIZE=" + std::string(v) + " is below the " +
                                       FormatSize(kMinBudget) + " the pipeline needs");
      options.pipeline.max_memory = *size;
    }
  }
  if (const char* v = set("VRAMFLOW_CODEC")) {
    Status s = ParseCodecSpec(v, &options.pipeline.encoder);
    if (!s.ok()) return s.WithContext("VRAMFLOW_CODEC");
  }
  if (const char* v = set("VRAMFLOW_THREADS")) {
    char* end = nullptr;
    unsigned long n = std::strtoul(v, &end, 10);
    if (*end != '\0' || n > 1024)
      return Status::InvalidArgument(std::string("VRAMFLOW_THREADS='") + v + "' is not a thread count (0 = every core)");
    options.pipeline.threads = static_cast<unsigned>(n);
  }
  if (const char* v = set("VRAMFLOW_TARGET")) options.target = v;
  if (const char* v = set("VRAMFLOW_KEY_FILE")) {
    Result<SharedKey> key = LoadKeyFile(v);
    if (!key.ok()) return key.status().WithContext("VRAMFLOW_KEY_FILE");
    options.transport.net.key = std::move(*key);
  }
  VF_ASSIGN_OR_RETURN(options.checks, MapChecksFromEnvironment(getenv));
  options.topology_root = set("VRAMFLOW_KFD_TOPOLOGY") ? set("VRAMFLOW_KFD_TOPOLOGY") : kKfdTopologyRoot;
  if (const char* v = set("VRAMFLOW_SIM_KFD")) options.sim_kfd = v;
  VF_ASSIGN_OR_RETURN(options.parallel_restore,
                      ParseTristate("VRAMFLOW_PARALLEL_RESTORE", getenv("VRAMFLOW_PARALLEL_RESTORE")));
  VF_ASSIGN_OR_RETURN(options.criu_stream, ParseTristate("VRAMFLOW_CRIU_STREAM", getenv("VRAMFLOW_CRIU_STREAM")));
  options.pipeline.producer = "vramflow amdgpu_plugin";
  // A restore listening on a network VRAMFLOW_TARGET gives up on a sender
  // that never comes, instead of holding CRIU for ever.
  options.transport.accept_timeout = std::chrono::minutes(10);
  return options;
}

}  // namespace vramflow
