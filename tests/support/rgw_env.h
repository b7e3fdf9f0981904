// SPDX-License-Identifier: MIT
// Hands the local Ceph RGW (scripts/rgw.sh, started once per ctest run by the rgw_start fixture)
// to the S3Rgw.* tests of every test binary that links rgw_env.cc (tests/CMakeLists.txt adds it
// with vramflow_discover_tests). CTest sets VRAMFLOW_RGW_ENV_FILE for S3Rgw.* tests only; the
// file holds `export NAME=value` lines: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_DEFAULT_REGION, VRAMFLOW_TEST_S3_BUCKET, or
// VRAMFLOW_TEST_S3_SKIP=reason when RGW could not start. A global GoogleTest environment loads
// them into the process environment before any test runs; with a skip reason it unsets
// AWS_ENDPOINT_URL and VRAMFLOW_TEST_S3_BUCKET, and S3Rgw tests skip, giving
// VRAMFLOW_TEST_S3_SKIP as the reason. Outside ctest nothing happens: export the variables
// yourself (eval "$(scripts/rgw.sh start /tmp/rgw)").
#pragma once

#include <string>

namespace vramflow::testing {

// "export NAME='value'" or "NAME=value" -> setenv(NAME, value). False for any other line.
bool ApplyExportLine(std::string line);

}  // namespace vramflow::testing
