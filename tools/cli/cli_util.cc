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

std::string FormatRate(uint64_t bytes, double seconds) {
  char buf[32];
  if (seconds <= 0) return "-";
  std::snprintf(buf, sizeof(buf), "%.1f MB/s", static_cast<double>(bytes) / seconds / 1e6);
  return buf;
}

}  // namespace vramflow
