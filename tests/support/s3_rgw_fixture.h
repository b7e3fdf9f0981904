// SPDX-License-Identifier: MIT
// The S3Rgw test fixture, shared by every S3Rgw.* test of vramflow_s3_tests
// (s3_rgw_test.cc, s3_cli_test.cc): GoogleTest wants one fixture class per
// test suite in a binary. It skips, saying why, unless the RGW settings are
// in the environment (the CTest fixture "rgw" puts them there; by hand:
// eval "$(scripts/rgw.sh start DIR)"), and gives each test a key prefix of
// its own.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "transport/aws/xml.h"
#include "transport/open_uri.h"
#include "transport/s3/s3_client.h"

namespace vramflow {

class S3Rgw : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* skip = std::getenv("VRAMFLOW_TEST_S3_SKIP"); skip && *skip) GTEST_SKIP() << "no Ceph RGW: " << skip;
    const char* endpoint = std::getenv("AWS_ENDPOINT_URL");
    const char* bucket = std::getenv("VRAMFLOW_TEST_S3_BUCKET");
    if (!endpoint || !*endpoint || !bucket || !*bucket)
      GTEST_SKIP() << "AWS_ENDPOINT_URL and VRAMFLOW_TEST_S3_BUCKET are not set (run under the rgw fixture, or "
                      "eval \"$(scripts/rgw.sh start DIR)\")";
    bucket_ = bucket;
    // A key of its own per run, so reruns and parallel runs do not meet.
    prefix_ = "s3rgw-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "/";
    options_.s3.part_size = 5 << 20;  // S3's minimum: works whatever RGW's min part size is
    options_.s3.memory_budget = 20 << 20;
    options_.s3.range_size = 3 << 20;
    options_.s3.stall_timeout = std::chrono::milliseconds(20000);
  }

  std::string Uri(const std::string& name) const { return "s3://" + bucket_ + "/" + prefix_ + name; }

  std::shared_ptr<s3::Client> Client() {
    auto config = s3::LoadConfig(options_.s3);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return std::make_shared<s3::Client>(*config, options_.s3, bucket_);
  }

  // Ids of the multipart uploads still open under `prefix` (ListMultipartUploads).
  static Result<std::vector<std::string>> OpenUploads(s3::Client& client, const std::string& prefix) {
    s3::Request list;
    list.method = "GET";
    list.query = {{"uploads", ""}, {"prefix", prefix}};
    list.what = "ListMultipartUploads";
    VF_ASSIGN_OR_RETURN(s3::Response reply, client.Send(list));
    return s3::XmlFields(reply.body, "UploadId");
  }

  std::string bucket_, prefix_;
  TransportOptions options_;
};

}  // namespace vramflow
