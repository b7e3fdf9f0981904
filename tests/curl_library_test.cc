// SPDX-License-Identifier: MIT
// libcurl is opened on first use, not linked (transport/aws/curl_library.h):
// the table is complete, the programs load without it, and a libcurl that
// lacks a function fails s3:// with a clear error.
#include "transport/aws/curl_library.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

TEST(CurlLibrary, OpensOnceWithEveryFunction) {
  Result<const s3::CurlApi*> curl = s3::OpenCurl();
  ASSERT_TRUE(curl.ok()) << curl.status().ToString();
  const s3::CurlApi& api = **curl;
  EXPECT_TRUE(api.easy_init && api.easy_setopt && api.easy_perform && api.easy_getinfo && api.easy_reset &&
              api.easy_cleanup && api.easy_strerror && api.slist_append && api.slist_free_all);
  EXPECT_EQ(*s3::OpenCurl(), &api);
  EXPECT_EQ(&s3::OpenedCurl(), &api);
  CURL* handle = api.easy_init();
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(api.easy_setopt(handle, CURLOPT_URL, "http://127.0.0.1:9/"), CURLE_OK);
  api.easy_cleanup(handle);
  EXPECT_STREQ(api.easy_strerror(CURLE_COULDNT_CONNECT), "Couldn't connect to server");
}

// Linked, libcurl would load 26 more libraries into every start of vramflow
// and into CRIU with the plugin.
TEST(CurlLibrary, NeitherTheCommandNorThePluginLinksIt) {
  for (const std::string& binary : {std::string(VRAMFLOW_BINARY), std::string(VRAMFLOW_PRODUCT_PLUGIN)}) {
    std::string out;
    ASSERT_EQ(testing::RunCommand("readelf -d '" + binary + "'", &out), 0) << out;
    EXPECT_NE(out.find("(NEEDED)"), std::string::npos) << out;
    EXPECT_EQ(out.find("libcurl"), std::string::npos) << binary << ":\n" << out;
  }
}

TEST(CurlLibrary, ALibcurlWithoutItsFunctionsFailsS3Clearly) {
  const std::string dir = ::testing::TempDir() + "/curl-library-test";
  std::string out;
  ASSERT_EQ(testing::RunCommand("mkdir -p '" + dir + "' && head -c 4096 /dev/urandom > '" + dir + "/in'", &out), 0);
  const int rc =
      testing::RunCommand("env LD_LIBRARY_PATH='" VRAMFLOW_FAKE_CURL_DIR
                          "' AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret "
                          "AWS_ENDPOINT_URL=http://127.0.0.1:9 AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null "
                          "AWS_SHARED_CREDENTIALS_FILE=/dev/null '" VRAMFLOW_BINARY "' pack '" +
                              dir + "/in' -o s3://bucket/key -q",
                          &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("libcurl.so.4 has no curl_global_init"), std::string::npos) << out;
  // A plain pack does not open libcurl, so the broken one does not matter.
  EXPECT_EQ(testing::RunCommand("env LD_LIBRARY_PATH='" VRAMFLOW_FAKE_CURL_DIR "' '" VRAMFLOW_BINARY "' pack '" + dir +
                                    "/in' -o '" + dir + "/out.vfs' -q -f",
                                &out),
            0)
      << out;
}

}  // namespace
}  // namespace vramflow
