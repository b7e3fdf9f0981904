// SPDX-License-Identifier: MIT
// See rgw_env.h.
#include "tests/support/rgw_env.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace vramflow::testing {

bool ApplyExportLine(std::string line) {
  if (line.rfind("export ", 0) == 0) line.erase(0, 7);
  const size_t eq = line.find('=');
  if (eq == std::string::npos || eq == 0 || line[0] == '#') return false;
  std::string value = line.substr(eq + 1);
  if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
    value = value.substr(1, value.size() - 2);
  }
  setenv(line.substr(0, eq).c_str(), value.c_str(), 1);
  return true;
}

namespace {

class RgwEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* file = std::getenv("VRAMFLOW_RGW_ENV_FILE");
    if (file == nullptr || *file == '\0') return;
    std::ifstream in(file);
    if (!in) {
      const std::string reason = std::string("no RGW environment file ") + file + " (rgw_start did not run)";
      setenv("VRAMFLOW_TEST_S3_SKIP", reason.c_str(), 1);
    }
    for (std::string line; std::getline(in, line);) ApplyExportLine(line);
    // The CLI journals its multipart uploads (transport/s3/s3_journal.h) under
    // $XDG_STATE_HOME: beside the RGW's files, not in the user's home.
    const std::string rgw_dir = std::string(file).substr(0, std::string(file).find_last_of('/'));
    setenv("XDG_STATE_HOME", (rgw_dir + "/state").c_str(), 1);
    if (const char* reason = std::getenv("VRAMFLOW_TEST_S3_SKIP"); reason != nullptr && *reason != '\0') {
      // The tests skip themselves, with the reason: GTEST_SKIP() here would make GoogleTest 1.12
      // report them as passed. Tests that only look for an endpoint skip too.
      unsetenv("AWS_ENDPOINT_URL");
      unsetenv("VRAMFLOW_TEST_S3_BUCKET");
    }
  }
};

// Registered before main() runs; GoogleTest owns it.
[[maybe_unused]] const ::testing::Environment* const kRgwEnvironment =
    ::testing::AddGlobalTestEnvironment(new RgwEnvironment);

}  // namespace
}  // namespace vramflow::testing
