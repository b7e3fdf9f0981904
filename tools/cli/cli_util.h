// SPDX-License-Identifier: MIT
// Small helpers shared by the CLI commands: producer string, ratios, rates.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/version.h"  // ProducerString

namespace vramflow {

// "1.482" (raw / stored), "inf" when nothing was stored.
std::string FormatRatio(uint64_t raw, uint64_t stored);
// "812.3 MB/s" (decimal megabytes, like zstd and lz4 print).
std::string FormatRate(uint64_t bytes, double seconds);

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace vramflow
