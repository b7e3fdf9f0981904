// SPDX-License-Identifier: MIT
// CriuLog: the plugin's messages, written into CRIU's own log through the
// print_on_level function the criu binary exports (as upstream's pr_err,
// pr_info and pr_debug do), so `criu dump -v4 -o dump.log` shows what the
// plugin did. Outside CRIU (a harness that does not export it) the messages
// go to stderr. Every line starts with "amdgpu_plugin (vramflow): ".
#pragma once

#include <string>

namespace vramflow {

enum class CriuLogLevel : unsigned {  // CRIU's LOG_* values (criu/include/log.h)
  kError = 1,
  kWarn = 2,
  kInfo = 3,
  kDebug = 4,
};

class CriuLog {
 public:
  // Looks up print_on_level in the process (dlsym); falls back to stderr.
  CriuLog();
  void Write(CriuLogLevel level, const std::string& message) const;
  void Error(const std::string& m) const { Write(CriuLogLevel::kError, m); }
  void Warn(const std::string& m) const { Write(CriuLogLevel::kWarn, m); }
  void Info(const std::string& m) const { Write(CriuLogLevel::kInfo, m); }
  void Debug(const std::string& m) const { Write(CriuLogLevel::kDebug, m); }

 private:
  using PrintOnLevel = void (*)(unsigned int, const char*, ...);
  PrintOnLevel print_on_level_;
};

}  // namespace vramflow
