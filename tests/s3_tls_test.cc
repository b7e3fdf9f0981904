// SPDX-License-Identifier: MIT
// s3:// over HTTPS with a private CA: FakeS3 behind `socat OPENSSL-LISTEN`
// (tests/support/s3_tls_front.h). Without the CA the upload fails, saying what to
// set; with it from --ca-bundle (S3Options::ca_bundle), AWS_CA_BUNDLE, the
// profile's ca_bundle or SSL_CERT_FILE it works.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/support/s3_fake_server.h"
#include "tests/support/s3_tls_front.h"
#include "transport/s3/s3_config.h"
#include "transport/s3/s3_sink.h"

namespace vramflow {
namespace {

using testing::FakeS3;
using testing::TlsFront;

class S3Tls : public ::testing::Test {
 protected:
  S3Tls() : front_(s3_.port()) {
    env_["HOME"] = front_.dir();
    env_["AWS_ACCESS_KEY_ID"] = "AKTLS";
    env_["AWS_SECRET_ACCESS_KEY"] = "tls-secret";
    s3_.AddKey("AKTLS", "tls-secret");
    options_.endpoint = front_.endpoint();
    options_.getenv = [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
    options_.limits = S3Limits{1024, 1 << 20, 10000};
    options_.part_size = 4096;
    options_.memory_budget = 4 * 4096;
    options_.retries = 1;
    options_.backoff_base = std::chrono::milliseconds(1);
  }

  Status Upload(const std::string& key) {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenS3Sink("bkt", key, options_));
    std::vector<uint8_t> data(10000, 0x42);
    VF_RETURN_IF_ERROR(sink->Write(data));
    return sink->Commit();
  }

  FakeS3 s3_;
  TlsFront front_;
  std::map<std::string, std::string> env_;
  S3Options options_;
};

TEST_F(S3Tls, PrivateCaNeedsItsBundle) {
  ASSERT_EQ(front_.error(), "");
  // Not trusted: a clear error, no retries, nothing uploaded.
  Status s = Upload("untrusted");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SSL peer certificate"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--ca-bundle"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("AWS_CA_BUNDLE"), std::string::npos) << s.message();
  EXPECT_EQ(s3_.Count("HeadObject"), 0);

  options_.ca_bundle = front_.ca_file();  // --ca-bundle
  s = Upload("flag");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(s3_.Object("bkt/flag")->size(), 10000u);
  EXPECT_GT(s3_.SignedBy("AKTLS"), 0);
  options_.ca_bundle.clear();

  env_["AWS_CA_BUNDLE"] = front_.ca_file();
  EXPECT_TRUE(Upload("env").ok());
  env_.erase("AWS_CA_BUNDLE");

  std::ofstream(front_.dir() + "/config") << "[default]\nca_bundle = " << front_.ca_file() << "\n";
  env_["AWS_CONFIG_FILE"] = front_.dir() + "/config";
  EXPECT_TRUE(Upload("profile").ok());
  env_.erase("AWS_CONFIG_FILE");

  env_["SSL_CERT_FILE"] = front_.ca_file();
  EXPECT_TRUE(Upload("ssl-cert-file").ok());

  // A bundle without the server's CA (the system's): refused, naming where it came from.
  env_["SSL_CERT_FILE"] = "/etc/ssl/certs/ca-certificates.crt";
  s = Upload("wrong-ca");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SSL_CERT_FILE"), std::string::npos) << s.message();
  // A bundle that does not exist: said before any request.
  options_.ca_bundle = front_.dir() + "/missing.pem";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("missing.pem (from --ca-bundle)"), std::string::npos)
      << config.status().message();
}

}  // namespace
}  // namespace vramflow
