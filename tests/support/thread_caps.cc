// SPDX-License-Identifier: MIT
#include "tests/support/thread_caps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <sstream>

#include "streamer/machine/machine_limits.h"

namespace vramflow::testing {

double FittingMemoryMib() {
  const MachineLimits limits = ReadMachineLimits();
  uint64_t bytes = limits.mem_available.value_or(UINT64_MAX);
  if (limits.cgroup_memory) bytes = std::min(bytes, *limits.cgroup_memory);
  return static_cast<double>(bytes) / (1 << 20);
}

bool ExpectThreadCapsOnlyFromMemory(const std::string& output, int wanted) {
  const std::regex cap("running [0-9]+ threads, not " + std::to_string(wanted) +
                       ": a memory budget of ([0-9.]+) (MiB|GiB) feeds no more$");
  bool none = true;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("note:") == std::string::npos && line.find("threads, not") == std::string::npos) continue;
    none = false;
    std::smatch m;
    if (!std::regex_search(line, m, cap)) {
      ADD_FAILURE() << "unexpected note: " << line;
      continue;
    }
    const double budget_mib = std::stod(m[1]) * (m[2] == "GiB" ? 1024 : 1);
    EXPECT_LT(FittingMemoryMib(), 8 * budget_mib) << "not a quarter of the memory left: " << line;
  }
  return none;
}

}  // namespace vramflow::testing
