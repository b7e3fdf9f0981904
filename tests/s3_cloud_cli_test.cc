// SPDX-License-Identifier: MIT
// The CLI's S3 settings as the aws CLI has them (S3Rgw.*, the RGW fixture),
// side by side with Debian's `aws` (2.9) on the same endpoint:
// an HTTPS endpoint with a private CA (socat in front of RGW,
// tests/support/s3_tls_front.h) needs --ca-bundle or AWS_CA_BUNDLE for both; the
// --endpoint-url, --region and --profile flags, and --profile outranking the
// environment's keys.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/s3_rgw_fixture.h"
#include "tests/support/s3_tls_front.h"
#include "tests/support/shell.h"

namespace vramflow {
namespace {

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;

CommandResult Sh(const std::string& line) { return testing::RunShell(line); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

#define EXPECT_CODE(result, expected) EXPECT_EQ((result).code, (expected)) << (result).output
#define ASSERT_CODE(result, expected) ASSERT_EQ((result).code, (expected)) << (result).output

// The RGW's port, from AWS_ENDPOINT_URL (http://127.0.0.1:PORT).
int RgwPort() {
  std::string url = std::getenv("AWS_ENDPOINT_URL");
  return std::stoi(url.substr(url.rfind(':') + 1));
}

// Debian's aws (2.9), not a pip-installed one earlier on PATH.
bool HaveAws() { return ::access("/usr/bin/aws", X_OK) == 0; }

class Scratch {
 public:
  Scratch() {
    char tmpl[] = "/tmp/vf-s3cloud-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// Neither tool trusts the private CA by default; both do with --ca-bundle or
// AWS_CA_BUNDLE; what vramflow uploads over HTTPS the aws CLI reads back over
// HTTPS, byte for byte.
TEST_F(S3Rgw, PrivateCaHttpsEndpointLikeTheAwsCli) {
  if (!HaveAws()) GTEST_SKIP() << "no /usr/bin/aws (scripts/setup.sh installs Debian's awscli)";
  testing::TlsFront front(RgwPort());
  ASSERT_EQ(front.error(), "");
  Scratch s;
  // No endpoint in the environment: the flag names it.
  // SSL_CERT_DIR stays as it is (the system's store, where set).
  const std::string env =
      "env -u AWS_ENDPOINT_URL -u AWS_CA_BUNDLE -u SSL_CERT_FILE AWS_EC2_METADATA_DISABLED=true HOME=" + Q(s.File(""));
  const std::string vf = env + " " + Q(VRAMFLOW_BINARY);
  const std::string aws = env + " /usr/bin/aws --endpoint-url " + front.endpoint();
  const std::string with_env = env + " AWS_CA_BUNDLE=" + Q(front.ca_file()) + " ";
  const std::string gen = " gen -k bf16 -s 6M --seed 11 --endpoint-url " + front.endpoint() + " -o ";
  const std::string uri = Uri("https.bin");

  CommandResult untrusted = Sh(vf + gen + Q(uri));
  EXPECT_CODE(untrusted, 1);
  EXPECT_TRUE(Contains(untrusted.output, "vramflow gen: error:")) << untrusted.output;
  EXPECT_TRUE(Contains(untrusted.output, "SSL peer certificate")) << untrusted.output;
  EXPECT_TRUE(Contains(untrusted.output, "--ca-bundle FILE or set AWS_CA_BUNDLE")) << untrusted.output;
  EXPECT_FALSE(Contains(untrusted.output, "gave up after")) << "a certificate failure is not retried";
  CommandResult aws_untrusted = Sh(aws + " s3 ls " + Q("s3://" + bucket_ + "/"));
  EXPECT_NE(aws_untrusted.code, 0) << aws_untrusted.output;
  EXPECT_TRUE(Contains(aws_untrusted.output, "SSL")) << aws_untrusted.output;

  ASSERT_CODE(Sh(vf + gen + Q(uri) + " --ca-bundle " + Q(front.ca_file())), 0);
  ASSERT_CODE(Sh(vf + " gen -k bf16 -s 6M --seed 11 -o " + Q(s.File("local.bin"))), 0);
  ASSERT_CODE(Sh(aws + " --ca-bundle " + Q(front.ca_file()) + " s3 cp --only-show-errors " + Q(uri) + " " +
                 Q(s.File("down.bin"))),
              0);
  EXPECT_TRUE(ReadFile(s.File("down.bin")) == ReadFile(s.File("local.bin")));

  // AWS_CA_BUNDLE, for both tools; and a second command (verify a packed stream).
  ASSERT_CODE(Sh(with_env + Q(VRAMFLOW_BINARY) + " pack " + Q(s.File("local.bin")) + " -q -o " + Q(Uri("https.vfs")) +
                 " --endpoint-url " + front.endpoint()),
              0);
  CommandResult verified =
      Sh(with_env + Q(VRAMFLOW_BINARY) + " verify " + Q(Uri("https.vfs")) + " --endpoint-url " + front.endpoint());
  EXPECT_CODE(verified, 0);
  CommandResult listed = Sh(with_env + "/usr/bin/aws --endpoint-url " + front.endpoint() + " s3 ls " +
                            Q("s3://" + bucket_ + "/" + prefix_));
  EXPECT_CODE(listed, 0);
  EXPECT_TRUE(Contains(listed.output, "https.vfs")) << listed.output;
}

// --profile takes the profile's keys even where the environment has others
// (AWS_PROFILE does not: the environment's keys come first), as with `aws`.
TEST_F(S3Rgw, ProfileFlagOutranksTheEnvironmentsKeys) {
  Scratch s;
  std::ofstream(s.File("credentials")) << "[rgw]\naws_access_key_id = " << std::getenv("AWS_ACCESS_KEY_ID")
                                       << "\naws_secret_access_key = " << std::getenv("AWS_SECRET_ACCESS_KEY") << "\n";
  const std::string env =
      "env -u AWS_ENDPOINT_URL AWS_SHARED_CREDENTIALS_FILE=" + Q(s.File("credentials")) +
      " AWS_CONFIG_FILE=" + Q(s.File("config")) +
      " AWS_ACCESS_KEY_ID=AKWRONG AWS_SECRET_ACCESS_KEY=wrong AWS_REGION=eu-west-9 AWS_EC2_METADATA_DISABLED=true ";
  const std::string endpoint = std::string(" --endpoint-url ") + std::getenv("AWS_ENDPOINT_URL");
  const std::string gen = Q(VRAMFLOW_BINARY) + " gen -s 64K -o " + Q(Uri("profile.bin")) + endpoint;

  CommandResult env_keys = Sh(env + "AWS_PROFILE=rgw " + gen);
  EXPECT_CODE(env_keys, 4);  // S3 refused the keys: authentication (tools/cli/exit_codes.h)
  EXPECT_TRUE(Contains(env_keys.output, "InvalidAccessKeyId")) << env_keys.output;
  CommandResult profile = Sh(env + gen + " --profile rgw --region us-east-1");
  EXPECT_CODE(profile, 0);
  CommandResult missing = Sh(env + gen + " --profile nobody");
  EXPECT_CODE(missing, 1);
  EXPECT_TRUE(Contains(missing.output, "profile 'nobody' is in neither")) << missing.output;
  if (HaveAws()) {
    CommandResult aws = Sh(env + "/usr/bin/aws --profile rgw --region us-east-1" + endpoint + " s3 ls " +
                           Q("s3://" + bucket_ + "/" + prefix_));
    EXPECT_CODE(aws, 0);
    EXPECT_TRUE(Contains(aws.output, "profile.bin")) << aws.output;
  }
}

}  // namespace
}  // namespace vramflow
