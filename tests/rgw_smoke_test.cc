// SPDX-License-Identifier: MIT
// Proves the RGW wiring (scripts/rgw.sh, the rgw_start/rgw_stop CTest fixture, rgw_env.cc)
// before any S3 client code: the endpoint answers, the test bucket exists for the test keys, and
// the server checks signatures. Skips when no endpoint is configured.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/rgw_env.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using testing::ApplyExportLine;
using testing::RunCommand;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// HTTP status of a SigV4-signed request by curl (curl >= 7.75 signs with --aws-sigv4).
std::string SignedStatus(const std::string& method, const std::string& url, const std::string& secret) {
  std::string out;
  const std::string verb = method == "HEAD" ? "-I" : "-X " + method;  // -X HEAD would wait for a body
  RunCommand("curl -s -o /dev/null -m 10 -w '%{http_code}' " + verb + " --aws-sigv4 'aws:amz:" + Env("AWS_REGION") +
                 ":s3' --user '" + Env("AWS_ACCESS_KEY_ID") + ":" + secret +
                 "' -H 'x-amz-content-sha256: "
                 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' '" +
                 url + "'",
             &out);
  return out;
}

TEST(S3Rgw, ServerAnswersAndBucketExists) {
  if (const std::string reason = Env("VRAMFLOW_TEST_S3_SKIP"); !reason.empty()) {
    GTEST_SKIP() << "no Ceph RGW: " << reason;
  }
  const std::string endpoint = Env("AWS_ENDPOINT_URL");
  const std::string bucket = Env("VRAMFLOW_TEST_S3_BUCKET");
  if (endpoint.empty() || bucket.empty()) {
    GTEST_SKIP() << "no S3 endpoint: AWS_ENDPOINT_URL and VRAMFLOW_TEST_S3_BUCKET unset (ctest starts RGW)";
  }
  ASSERT_FALSE(Env("AWS_ACCESS_KEY_ID").empty());
  ASSERT_FALSE(Env("AWS_SECRET_ACCESS_KEY").empty());

  std::string out;
  ASSERT_EQ(RunCommand("curl -s -o /dev/null -m 10 -w '%{http_code}' '" + endpoint + "/'", &out), 0)
      << "endpoint " << endpoint << " does not answer: " << out;
  EXPECT_EQ(out, "200") << "anonymous ListBuckets";

  // Debian's awscli 2.9 ignores AWS_ENDPOINT_URL (read from 2.13 on), so pass it explicitly.
  const char* aws = RunCommand("test -x /usr/bin/aws", &out) == 0 ? "/usr/bin/aws"
                    : RunCommand("command -v aws", &out) == 0     ? "aws"
                                                                  : nullptr;
  if (aws != nullptr) {
    EXPECT_EQ(
        RunCommand(std::string(aws) + " --endpoint-url '" + endpoint + "' s3api head-bucket --bucket '" + bucket + "'",
                   &out),
        0)
        << out;
  }
  EXPECT_EQ(SignedStatus("HEAD", endpoint + "/" + bucket, Env("AWS_SECRET_ACCESS_KEY")), "200");
  EXPECT_EQ(SignedStatus("HEAD", endpoint + "/" + bucket + "-absent", Env("AWS_SECRET_ACCESS_KEY")), "404");
  EXPECT_EQ(SignedStatus("HEAD", endpoint + "/" + bucket, "wrong-secret"), "403");
}

TEST(RgwEnv, ParsesExportLines) {
  EXPECT_TRUE(ApplyExportLine("export VRAMFLOW_RGW_ENV_TEST_A=http://127.0.0.1:1"));
  EXPECT_EQ(Env("VRAMFLOW_RGW_ENV_TEST_A"), "http://127.0.0.1:1");
  EXPECT_TRUE(ApplyExportLine("export VRAMFLOW_RGW_ENV_TEST_B='RGW did not start: x (logs: /b/rgw.log/)'"));
  EXPECT_EQ(Env("VRAMFLOW_RGW_ENV_TEST_B"), "RGW did not start: x (logs: /b/rgw.log/)");
  EXPECT_TRUE(ApplyExportLine("VRAMFLOW_RGW_ENV_TEST_C="));
  EXPECT_EQ(Env("VRAMFLOW_RGW_ENV_TEST_C"), "");
  EXPECT_FALSE(ApplyExportLine("# a=b"));
  EXPECT_FALSE(ApplyExportLine("=x"));
  EXPECT_FALSE(ApplyExportLine(""));
  for (const char* name : {"VRAMFLOW_RGW_ENV_TEST_A", "VRAMFLOW_RGW_ENV_TEST_B", "VRAMFLOW_RGW_ENV_TEST_C"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace vramflow
