// SPDX-License-Identifier: MIT
#include "plugin/criu_log.h"

#include <dlfcn.h>

#include <cstdio>

namespace vramflow {

CriuLog::CriuLog() : print_on_level_(reinterpret_cast<PrintOnLevel>(::dlsym(RTLD_DEFAULT, "print_on_level"))) {}

void CriuLog::Write(CriuLogLevel level, const std::string& message) const {
  constexpr char kPrefix[] = "amdgpu_plugin (vramflow): ";
  if (print_on_level_) {
    print_on_level_(static_cast<unsigned>(level), "%s%s\n", kPrefix, message.c_str());
  } else if (level <= CriuLogLevel::kWarn) {
    std::fprintf(stderr, "%s%s\n", kPrefix, message.c_str());
  }
}

}  // namespace vramflow
