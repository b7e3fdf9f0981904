// SPDX-License-Identifier: MIT
#include "tools/cli/cli_util.h"

#include <cstdio>

#include "common/units.h"

namespace vramflow {

std::string FormatRatio(uint64_t raw, uint64_t stored) {
  if (stored == 0) return raw == 0 ? "1.000" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(raw) / static_cast<double>(stored));
  return buf;
}

Status ExplainBudgetShare(const Status& status, uint64_t max_memory, uint64_t pipeline_budget, const std::string& uri) {
  if (status.ok() || status.code() != Status::Code::kInvalidArgument || pipeline_budget >= max_memory ||
      status.message().find("memory budget") == std::string::npos)
    return status;
  return status.WithContext("--max-memory " + FormatSize(max_memory) + " less " +
                            FormatSize(max_memory - pipeline_budget) + " for the buffers of " + uri +
                            " leaves the pipeline " + FormatSize(pipeline_budget));
}

std::string FormatRate(uint64_t bytes, double seconds) {
  char buf[32];
  if (seconds <= 0) return "-";
  std::snprintf(buf, sizeof(buf), "%.1f MB/s", static_cast<double>(bytes) / seconds / 1e6);
  return buf;
}

}  // namespace vramflow
