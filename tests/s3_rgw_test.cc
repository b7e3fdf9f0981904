// SPDX-License-Identifier: MIT
// The s3:// transport against a real Ceph RADOS Gateway (scripts/rgw.sh;
// the CTest fixture "rgw" starts one and exports AWS_ENDPOINT_URL,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and
// VRAMFLOW_TEST_S3_BUCKET). Without those variables every test skips and
// says why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/support/s3_rgw_fixture.h"
#include "transport/open_uri.h"
#include "transport/s3/s3_client.h"

namespace vramflow {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

//! A multi-part stream goes up through OpenSink and comes back through
//! OpenSource byte for byte.
TEST_F(S3Rgw, MultipartRoundTrip) {
  auto data = RandomBytes((13 << 20) + 4321, 1);  // 3 parts of 5 MiB
  {
    auto sink = OpenSink(Uri("round-trip"), options_);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    for (size_t pos = 0; pos < data.size(); pos += 1 << 20)
      ASSERT_TRUE((*sink)->Write(std::span(data).subspan(pos, std::min<size_t>(1 << 20, data.size() - pos))).ok());
    Status s = (*sink)->Commit();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  auto source = OpenSource(Uri("round-trip"), options_);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<uint8_t> back(data.size() + 1);
  auto n = ReadFully(**source, back);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, data.size());
  back.resize(*n);
  EXPECT_TRUE(back == data);
}

//! A wrong secret fails with RGW's 403 SignatureDoesNotMatch and says
//! which setting to check.
TEST_F(S3Rgw, WrongSecretIsAClear403) {
  options_.s3.getenv = [](const char* name) -> const char* {
    if (std::string(name) == "AWS_SECRET_ACCESS_KEY") return "not-the-secret-key-at-all-000000000000000";
    return std::getenv(name);
  };
  auto sink = OpenSink(Uri("wrong-secret"), options_);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  ASSERT_TRUE((*sink)->Write(RandomBytes(1000, 2)).ok());
  Status s = (*sink)->Commit();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("check AWS_SECRET_ACCESS_KEY"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(Uri("wrong-secret")), std::string::npos) << s.message();
}

//! A sink destroyed mid-upload (killed dump) leaves no object and no
//! multipart upload behind.
TEST_F(S3Rgw, KilledUploadLeavesNothing) {
  {
    auto sink = OpenSink(Uri("killed"), options_);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    ASSERT_TRUE((*sink)->Write(RandomBytes(12 << 20, 3)).ok());  // two parts on their way
  }
  auto client = Client();
  auto keys = client->ListKeys(prefix_);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_TRUE(keys->empty()) << (*keys)[0];
  auto uploads = OpenUploads(*client, prefix_);
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << (*uploads)[0];
}

}  // namespace
}  // namespace vramflow
