// SPDX-License-Identifier: MIT
// The credential chain (transport/aws/credential_chain.h) end to end:
// credentials from a fake STS, container endpoint and instance metadata
// (tests/support/aws_fake_endpoints.h) sign real uploads to FakeS3, which accepts
// only the keys those fakes issued, signed correctly, with their session
// token, before they expire. Environments are injected (S3Options::getenv).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/aws_fake_endpoints.h"
#include "tests/support/cli_child.h"
#include "tests/support/s3_fake_server.h"
#include "tests/support/shell.h"
#include "transport/aws/credential_process.h"
#include "transport/aws/credentials.h"
#include "transport/aws/metadata.h"
#include "transport/aws/sts.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_config.h"
#include "transport/s3/s3_sink.h"

namespace vramflow {
namespace {

using testing::FakeAws;
using testing::FakeS3;

class S3Credentials : public ::testing::Test {
 protected:
  S3Credentials() : aws_(&s3_) {
    char tmpl[] = "/tmp/vf-s3-creds-XXXXXX";
    dir_ = mkdtemp(tmpl);
    env_["HOME"] = dir_;
    env_["AWS_EC2_METADATA_DISABLED"] = "true";
    env_["AWS_ENDPOINT_URL_STS"] = aws_.endpoint();
    options_.endpoint = s3_.endpoint();
    options_.getenv = [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() || it->second.empty() ? nullptr : it->second.c_str();
    };
    options_.limits = S3Limits{1024, 1 << 20, 10000};
    options_.part_size = 4096;
    options_.memory_budget = 4 * 4096;
    options_.concurrency = 2;
    options_.retries = 2;
    options_.backoff_base = std::chrono::milliseconds(1);
    options_.backoff_max = std::chrono::milliseconds(5);
    // Some key the fake S3 knows, so that it checks every signature.
    s3_.AddKey("AKSTATIC", "static-secret");
  }
  ~S3Credentials() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::system(("mkdir -p \"$(dirname '" + path + "')\"").c_str());
    std::ofstream(path) << text;
    return path;
  }

  // Uploads `size` bytes to bkt/`key` in several parts; returns the status.
  Status Upload(const std::string& key, size_t size = 20000) {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenS3Sink("bkt", key, options_));
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(i * 7);
    VF_RETURN_IF_ERROR(sink->Write(data));
    return sink->Commit();
  }

  FakeS3 s3_;
  FakeAws aws_;
  std::string dir_;
  std::map<std::string, std::string> env_;
  S3Options options_;
};

TEST_F(S3Credentials, FakeS3ChecksSignatureAndToken) {
  env_["AWS_ACCESS_KEY_ID"] = "AKSTATIC";
  env_["AWS_SECRET_ACCESS_KEY"] = "static-secret";
  ASSERT_TRUE(Upload("ok").ok());
  EXPECT_GT(s3_.SignedBy("AKSTATIC"), 0);

  env_["AWS_SECRET_ACCESS_KEY"] = "wrong";
  Status s = Upload("bad-secret");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SignatureDoesNotMatch"), std::string::npos) << s.message();

  // Temporary keys without their session token are refused.
  s3_.AddKey("ASIATEMP", "temp-secret", "the-token");
  env_["AWS_ACCESS_KEY_ID"] = "ASIATEMP";
  env_["AWS_SECRET_ACCESS_KEY"] = "temp-secret";
  s = Upload("no-token");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("InvalidToken"), std::string::npos) << s.message();
  env_["AWS_SESSION_TOKEN"] = "the-token";
  EXPECT_TRUE(Upload("with-token").ok());
  EXPECT_FALSE(s3_.Object("bkt/no-token").has_value());
}

TEST_F(S3Credentials, WebIdentityTokenFile) {
  aws_.SetWebIdentityToken("eyJ.oidc.token");
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = Write("token", "eyJ.oidc.token\n");
  env_["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/ckpt-writer";
  env_["AWS_ROLE_SESSION_NAME"] = "pod-7";
  Status s = Upload("irsa");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(s3_.Object("bkt/irsa").has_value());
  ASSERT_EQ(aws_.Issued().size(), 1u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[0]), 2);  // HEAD, create, parts, complete
  std::map<std::string, std::string> form = aws_.LastStsForm();
  EXPECT_EQ(form["Action"], "AssumeRoleWithWebIdentity");
  EXPECT_EQ(form["RoleArn"], "arn:aws:iam::123456789012:role/ckpt-writer");
  EXPECT_EQ(form["RoleSessionName"], "pod-7");

  // A token STS refuses: a clear error before anything is uploaded.
  Write("token", "expired.token");
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("InvalidIdentityToken"), std::string::npos) << config.status().message();
  EXPECT_NE(config.status().message().find("web identity"), std::string::npos) << config.status().message();
}

TEST_F(S3Credentials, WebIdentityFromTheProfile) {
  aws_.SetWebIdentityToken("profile-token");
  Write(".aws/config",
        "[profile irsa]\nrole_arn = arn:aws:iam::1:role/r\nweb_identity_token_file = " + dir_ + "/tok\n");
  Write("tok", "profile-token");
  env_["AWS_PROFILE"] = "irsa";
  ASSERT_TRUE(Upload("p").ok());
  EXPECT_EQ(aws_.Count("AssumeRoleWithWebIdentity"), 1);
}

TEST_F(S3Credentials, AssumeRoleFromSourceProfile) {
  aws_.AllowSource("AKBASE", "base-secret");
  Write(".aws/credentials", "[base]\naws_access_key_id = AKBASE\naws_secret_access_key = base-secret\n");
  Write(
      ".aws/config",
      "[profile writer]\nrole_arn = arn:aws:iam::1:role/writer\nsource_profile = base\nexternal_id = ext-9\n"
      "role_session_name = ckpt\n[profile chained]\nrole_arn = arn:aws:iam::1:role/second\nsource_profile = writer\n");
  // --profile: the environment's keys are not used, as with `aws --profile`.
  env_["AWS_ACCESS_KEY_ID"] = "AKSTATIC";
  env_["AWS_SECRET_ACCESS_KEY"] = "static-secret";
  options_.profile = "writer";
  Status s = Upload("role");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(s3_.SignedBy("AKSTATIC"), 0);
  EXPECT_EQ(aws_.Count("AssumeRole"), 1);
  std::map<std::string, std::string> form = aws_.LastStsForm();
  EXPECT_EQ(form["RoleArn"], "arn:aws:iam::1:role/writer");
  EXPECT_EQ(form["ExternalId"], "ext-9");
  EXPECT_EQ(form["RoleSessionName"], "ckpt");
  ASSERT_EQ(aws_.Issued().size(), 1u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[0]), 0);

  // AWS_PROFILE does not outrank the environment's keys; --profile does.
  options_.profile = "";
  env_["AWS_PROFILE"] = "writer";
  ASSERT_TRUE(Upload("env").ok());
  EXPECT_GT(s3_.SignedBy("AKSTATIC"), 0);

  // A role whose source is another role: two AssumeRole calls, the second
  // signed with the first one's temporary keys and token (the fake STS
  // checks both).
  env_.erase("AWS_ACCESS_KEY_ID");
  env_["AWS_PROFILE"] = "chained";
  ASSERT_TRUE(Upload("chained").ok());
  EXPECT_EQ(aws_.Count("AssumeRole"), 3);
  EXPECT_EQ(aws_.LastStsForm()["RoleArn"], "arn:aws:iam::1:role/second");
  ASSERT_EQ(aws_.Issued().size(), 3u);
  EXPECT_EQ(s3_.SignedBy(aws_.Issued()[1]), 0);  // the intermediate role's keys only sign for STS
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[2]), 0);

  // A loop of source profiles is refused.
  Write(".aws/config",
        "[profile a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = b\n"
        "[profile b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = a\n");
  env_["AWS_PROFILE"] = "a";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("loop"), std::string::npos) << config.status().message();

  // The wrong source secret: STS says the signature does not match.
  Write(".aws/credentials", "[base]\naws_access_key_id = AKBASE\naws_secret_access_key = nope\n");
  Write(".aws/config", "[profile writer]\nrole_arn = arn:aws:iam::1:role/writer\nsource_profile = base\n");
  env_["AWS_PROFILE"] = "writer";
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("SignatureDoesNotMatch"), std::string::npos) << config.status().message();

  // Settings STS would refuse are refused here, naming the profile.
  Write(".aws/config",
        "[profile writer]\nrole_arn = arn:aws:iam::1:role/writer\nsource_profile = base\n"
        "duration_seconds = 1h\n");
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("profile 'writer': duration_seconds '1h'"), std::string::npos)
      << config.status().message();
}

TEST_F(S3Credentials, CredentialProcess) {
  s3_.AddKey("AKPROC", "proc-secret", "proc-token");
  std::string script =
      Write("creds.sh",
            "#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": "
            "\"proc-secret\", \"SessionToken\": \"proc-token\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n");
  ::chmod(script.c_str(), 0755);
  Write(".aws/config", "[default]\ncredential_process = " + script +
                           " --flag\n[profile failing]\n"
                           "credential_process = sh -c 'echo broken >&2; exit 3'\n");
  ASSERT_TRUE(Upload("proc").ok());
  EXPECT_GT(s3_.SignedBy("AKPROC"), 0);

  env_["AWS_PROFILE"] = "failing";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("exited with status 3 (stderr: broken)"), std::string::npos)
      << config.status().message();

  // Bounded in time and output; JSON checked.
  // What the command started dies with it (here a sleep that would keep a
  // pipe open for 5 s).
  auto started = std::chrono::steady_clock::now();
  std::string pid_file = dir_ + "/grandchild.pid";
  s3::CredentialProcessOptions quick;
  quick.timeout = std::chrono::milliseconds(300);
  auto slow = s3::RunCredentialProcess("sleep 5 & echo $! > " + pid_file + "; wait", quick);
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("killed"), std::string::npos) << slow.status().message();
  std::ifstream pid_in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(pid_in >> grandchild);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(100));        // the kill is delivered at once; reaping by init may lag
  bool alive = ::kill(grandchild, 0) == 0 &&  // and not a zombie waiting for init
               testing::RunShell("ps -o stat= -p " + std::to_string(grandchild) + " | grep -qv Z").code == 0;
  EXPECT_FALSE(alive) << "the sleep the command started outlived it";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
  s3::CredentialProcessOptions small;
  small.timeout = std::chrono::seconds(5);
  small.max_output = 4096;
  auto flood = s3::RunCredentialProcess("yes", small);
  ASSERT_FALSE(flood.ok());
  EXPECT_NE(flood.status().message().find("more than 4096 bytes"), std::string::npos) << flood.status().message();
  auto v2 = s3::RunCredentialProcess("echo '{\"Version\": 2, \"AccessKeyId\": \"a\", \"SecretAccessKey\": \"b\"}'");
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("Version"), std::string::npos) << v2.status().message();
}

TEST_F(S3Credentials, ContainerEndpointWithPodIdentityToken) {
  aws_.SetContainerToken("pod-identity-token");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = aws_.endpoint() + "/container/creds";
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = Write("eks-token", "pod-identity-token\n");
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "ignored-when-a-file-is-given";
  Status s = Upload("pod");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("Container"), 1);
  EXPECT_GT(s3_.SignedBy(aws_.Issued().at(0)), 0);

  // The token from the variable when there is no file; a wrong one is refused.
  env_.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("HTTP 403"), std::string::npos) << config.status().message();
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "pod-identity-token";
  EXPECT_TRUE(s3::LoadConfig(options_).ok());

  // ECS: a relative URI on 169.254.170.2 (here the fake, via the test hook).
  env_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  env_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container/creds";
  options_.container_credentials_base = aws_.endpoint();
  EXPECT_TRUE(Upload("ecs").ok());

  // FULL_URI over plain http only to loopback or the ECS/EKS addresses.
  EXPECT_TRUE(s3::CheckContainerFullUri("http://127.0.0.1:80/x").ok());
  EXPECT_TRUE(s3::CheckContainerFullUri("http://[::1]:80/x").ok());
  EXPECT_TRUE(s3::CheckContainerFullUri("http://169.254.170.23/v1/credentials").ok());
  EXPECT_TRUE(s3::CheckContainerFullUri("https://creds.example.com/x").ok());
  EXPECT_FALSE(s3::CheckContainerFullUri("http://10.1.2.3/creds").ok());
  EXPECT_FALSE(s3::CheckContainerFullUri("http://127.0.0.1.evil.com/creds").ok());
  env_.erase("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://10.1.2.3/creds";
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("loopback"), std::string::npos) << config.status().message();
}

TEST_F(S3Credentials, InstanceMetadataV2) {
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = aws_.endpoint();
  Status s = Upload("ec2");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("ImdsToken"), 1);
  EXPECT_EQ(aws_.Count("ImdsRole"), 1);
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 1);
  EXPECT_GT(s3_.SignedBy(aws_.Issued().at(0)), 0);

  env_["AWS_EC2_METADATA_DISABLED"] = "true";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("no S3 credentials"), std::string::npos) << config.status().message();
  EXPECT_EQ(aws_.Count("ImdsToken"), 1);
}

// A token request that gets no reply (a container behind a hop limit of 1)
// or is refused falls back to IMDSv1 where the instance answers it; with
// IMDSv1 disabled, by variable or profile key, it is an error that says so,
// and no GET goes out without a token.
TEST_F(S3Credentials, InstanceMetadataV1FallbackAndItsRefusal) {
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = aws_.endpoint();
  aws_.SetImdsV1(true);
  aws_.DropNext("ImdsToken", 1);
  Status s = Upload("v1-dropped-token");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("ImdsToken"), 1);
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 1);
  EXPECT_GT(s3_.SignedBy(aws_.Issued().at(0)), 0);

  aws_.FailNext("ImdsToken", 1);  // 503, one attempt: no token either
  ASSERT_TRUE(Upload("v1-failed-token").ok());
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 2);

  // With the instance requiring tokens, the same lost reply fails, naming both.
  aws_.SetImdsV1(false);
  aws_.DropNext("ImdsToken", 1);
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("HTTP 401"), std::string::npos) << config.status().message();
  EXPECT_NE(config.status().message().find("IMDSv1: no token"), std::string::npos) << config.status().message();

  aws_.SetImdsV1(true);
  env_["AWS_EC2_METADATA_V1_DISABLED"] = "true";
  for (const char* how : {"variable", "profile key"}) {
    SCOPED_TRACE(how);
    if (std::string(how) == "profile key") {
      env_.erase("AWS_EC2_METADATA_V1_DISABLED");
      Write(".aws/config", "[default]\nec2_metadata_v1_disabled = true\n");
    }
    const int gets = aws_.Count("ImdsRole");
    aws_.DropNext("ImdsToken", 1);
    config = s3::LoadConfig(options_);
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("IMDSv1 is disabled"), std::string::npos) << config.status().message();
    EXPECT_EQ(aws_.Count("ImdsRole"), gets);
    ASSERT_TRUE(Upload(std::string("v2-") + (how[0] == 'v' ? "var" : "key")).ok());  // with a token it works
  }
}

// AWS_METADATA_SERVICE_NUM_ATTEMPTS / metadata_service_num_attempts: each
// IMDS request is tried that many times (botocore's default: once).
TEST_F(S3Credentials, InstanceMetadataAttempts) {
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = aws_.endpoint();
  aws_.FailNext("ImdsRole", 1);
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("GET the role name: HTTP 503"), std::string::npos)
      << config.status().message();

  env_["AWS_METADATA_SERVICE_NUM_ATTEMPTS"] = "3";
  aws_.FailNext("ImdsToken", 2);
  aws_.FailNext("ImdsRole", 2);
  aws_.FailNext("ImdsCredentials", 1);
  const int tokens = aws_.Count("ImdsToken");
  ASSERT_TRUE(Upload("attempts-env").ok());
  EXPECT_EQ(aws_.Count("ImdsToken") - tokens, 3);  // IMDSv2 on the third try

  env_.erase("AWS_METADATA_SERVICE_NUM_ATTEMPTS");
  Write(".aws/config", "[default]\nmetadata_service_num_attempts = 2\n");
  aws_.FailNext("ImdsCredentials", 1);
  ASSERT_TRUE(Upload("attempts-key").ok());

  for (const char* bad : {"0", "11", "2x", "-1"}) {
    env_["AWS_METADATA_SERVICE_NUM_ATTEMPTS"] = bad;
    config = s3::LoadConfig(options_);
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("attempts '" + std::string(bad) + "'"), std::string::npos)
        << config.status().message();
  }
  env_["AWS_METADATA_SERVICE_NUM_ATTEMPTS"] = "1";
  env_["AWS_METADATA_SERVICE_TIMEOUT"] = "soon";
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("timeout 'soon'"), std::string::npos) << config.status().message();
}

// Where IMDS is: the endpoint (variable, else the profile's
// ec2_metadata_service_endpoint), else the endpoint mode's address; an
// unknown mode is an error, as in botocore.
TEST_F(S3Credentials, InstanceMetadataEndpointAndMode) {
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_METADATA_SERVICE_TIMEOUT"] = "0.3";  // where nothing answers
  Write(".aws/config", "[default]\nec2_metadata_service_endpoint = " + aws_.endpoint() +
                           "\nec2_metadata_service_endpoint_mode = IPv6\n");
  ASSERT_TRUE(Upload("endpoint-key").ok());  // the endpoint wins over the mode
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 1);

  Write(".aws/config", "[default]\nec2_metadata_service_endpoint_mode = IPv6\n");
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("instance metadata (IMDS) http://[fd00:ec2::254]:"), std::string::npos)
      << config.status().message();

  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "ipv4";  // the variable wins over the key
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("instance metadata (IMDS) http://169.254.169.254:"), std::string::npos)
      << config.status().message();

  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "IPv5";
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("endpoint mode 'IPv5'"), std::string::npos) << config.status().message();
  EXPECT_EQ(aws_.Count("ImdsToken"), 1);
}

// The CLI as a pod on EKS with IRSA runs it: web identity credentials from
// the fake STS, the upload to the fake S3 (signed with them), then read back.
TEST_F(S3Credentials, CliWithWebIdentity) {
  aws_.SetWebIdentityToken("irsa-token");
  std::string env = "env -i PATH=/usr/bin:/bin HOME=" + testing::ShellQuote(dir_) +
                    " AWS_EC2_METADATA_DISABLED=true AWS_ENDPOINT_URL_STS=" + aws_.endpoint() +
                    " AWS_WEB_IDENTITY_TOKEN_FILE=" + testing::ShellQuote(Write("irsa", "irsa-token")) +
                    " AWS_ROLE_ARN=arn:aws:iam::1:role/pod AWS_ROLE_SESSION_NAME=pod ";
  std::string vf = env + testing::ShellQuote(VRAMFLOW_BINARY);
  testing::CommandResult r = testing::RunShell(vf + " gen -k bf16 -s 3M --seed 5 -o s3://bkt/irsa.bin --endpoint-url " +
                                               s3_.endpoint() + " --region eu-west-1");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(s3_.Object("bkt/irsa.bin").has_value());
  EXPECT_EQ(s3_.Object("bkt/irsa.bin")->size(), 3u << 20);
  ASSERT_EQ(aws_.Issued().size(), 1u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[0]), 0);
  EXPECT_EQ(aws_.LastStsForm()["RoleSessionName"], "pod");

  // A token STS refuses: exit 1, saying which source failed, nothing stored.
  Write("irsa", "other-token");
  r = testing::RunShell(vf + " gen -s 1M -o s3://bkt/refused.bin --endpoint-url " + s3_.endpoint());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("vramflow gen: error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("InvalidIdentityToken"), std::string::npos) << r.output;
  EXPECT_FALSE(s3_.Object("bkt/refused.bin").has_value());
}

// An SSO profile after `aws sso login`: the cached token (file named by the
// SHA-1 of the session name, computed here with sha1sum) buys role keys.
TEST_F(S3Credentials, SsoCachedToken) {
  aws_.SetSsoToken("sso-access-token");
  env_["AWS_ENDPOINT_URL_SSO"] = aws_.endpoint();
  Write(".aws/config",
        "[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Writer\n"
        "[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = eu-west-1\n"
        "[profile legacy]\nsso_start_url = https://old.awsapps.com/start\nsso_region = us-east-1\n"
        "sso_account_id = 444455556666\nsso_role_name = Reader\n");
  auto sha1 = [](const std::string& key) {
    testing::CommandResult r = testing::RunShell("printf %s " + testing::ShellQuote(key) + " | sha1sum | cut -c1-40");
    return r.output.substr(0, 40);
  };
  Write(".aws/sso/cache/" + sha1("corp") + ".json",
        "{\"startUrl\": \"https://corp.awsapps.com/start\", \"region\": \"eu-west-1\", \"accessToken\": "
        "\"sso-access-token\", \"expiresAt\": \"2999-01-01T00:00:00Z\"}");
  env_["AWS_PROFILE"] = "dev";
  Status s = Upload("sso");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("Sso"), 1);
  EXPECT_EQ(aws_.LastStsForm()["role_name"], "Writer");
  EXPECT_EQ(aws_.LastStsForm()["account_id"], "111122223333");
  EXPECT_GT(s3_.SignedBy(aws_.Issued().at(0)), 0);

  // A legacy profile's cache is named by its start URL; an expired token
  // says to log in again, without asking the portal, and is not renewed
  // (as by the aws CLI: only profiles with an sso_session are).
  aws_.SetSsoRefresh("cid", "csecret", "rt", "renewed", 3600, "");
  Write(".aws/sso/cache/" + sha1("https://old.awsapps.com/start") + ".json",
        "{\"accessToken\": \"sso-access-token\", \"expiresAt\": \"2020-01-01T00:00:00UTC\", "
        "\"clientId\": \"cid\", \"clientSecret\": \"csecret\", "
        "\"registrationExpiresAt\": \"2999-01-01T00:00:00Z\", \"refreshToken\": \"rt\"}");
  env_["AWS_PROFILE"] = "legacy";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("aws sso login --profile legacy"), std::string::npos)
      << config.status().message();
  EXPECT_EQ(aws_.Count("Sso"), 1);
  EXPECT_EQ(aws_.Count("OidcToken"), 0);
  // A token the portal does not know.
  Write(".aws/sso/cache/" + sha1("https://old.awsapps.com/start") + ".json",
        "{\"accessToken\": \"stale\", \"expiresAt\": \"2999-01-01T00:00:00Z\"}");
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("HTTP 401"), std::string::npos) << config.status().message();
}

// The SSO profile of SsoCachedToken, with the session's cache file as
// `aws sso login` leaves it: the access token, when it expires, and the
// refresh token and client registration that renew it.
class S3SsoRenewal : public S3Credentials {
 protected:
  S3SsoRenewal() {
    env_["AWS_ENDPOINT_URL_SSO"] = aws_.endpoint();
    env_["AWS_ENDPOINT_URL_SSO_OIDC"] = aws_.endpoint();
    env_["AWS_PROFILE"] = "dev";
    Write(".aws/config",
          "[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Writer\n"
          "region = eu-west-1\n[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\n"
          "sso_region = eu-west-1\n");
    testing::CommandResult r = testing::RunShell("printf %s corp | sha1sum | cut -c1-40");
    cache_ = dir_ + "/.aws/sso/cache/" + r.output.substr(0, 40) + ".json";
  }

  // Writes the cache file: `token` expiring `expires_in` seconds from now,
  // the refresh token "rt-1" and client "cid", registered until `registered`.
  void WriteCache(const std::string& token, long expires_in, const std::string& registered = "2999-01-01T00:00:00Z") {
    Write(".aws/sso/cache/" + cache_.substr(cache_.rfind('/') + 1),
          nlohmann::ordered_json{{"startUrl", "https://corp.awsapps.com/start"},
                                 {"region", "eu-west-1"},
                                 {"accessToken", token},
                                 {"expiresAt", s3::FormatIso8601(std::time(nullptr) + expires_in)},
                                 {"clientId", "cid"},
                                 {"clientSecret", "csecret"},
                                 {"registrationExpiresAt", registered},
                                 {"refreshToken", "rt-1"}}
              .dump());
  }

  nlohmann::ordered_json Cache() const {
    std::ifstream in(cache_);
    return nlohmann::ordered_json::parse(in, nullptr, false);
  }

  std::string cache_;
};

// An expired token is renewed with its refresh token, as the aws CLI does:
// the new token buys the role keys, and the cache holds it (and the new
// refresh token) for the next run, which then renews nothing.
TEST_F(S3SsoRenewal, ExpiredTokenIsRenewed) {
  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "rt-1", "new-token", 28800, "rt-2");
  Status s = Upload("renewed");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(aws_.Count("Sso"), 1);
  EXPECT_GT(s3_.SignedBy(aws_.Issued().at(0)), 0);
  EXPECT_EQ(
      nlohmann::json::parse(aws_.LastOidcBody()),
      (nlohmann::json{
          {"grantType", "refresh_token"}, {"clientId", "cid"}, {"clientSecret", "csecret"}, {"refreshToken", "rt-1"}}));

  nlohmann::ordered_json cache = Cache();
  ASSERT_TRUE(cache.is_object());
  EXPECT_EQ(cache["accessToken"], "new-token");
  EXPECT_EQ(cache["refreshToken"], "rt-2");
  EXPECT_EQ(cache["clientId"], "cid");
  EXPECT_EQ(cache["registrationExpiresAt"], "2999-01-01T00:00:00Z");
  EXPECT_EQ(cache["startUrl"], "https://corp.awsapps.com/start");
  Result<std::time_t> expires = s3::ParseIso8601(cache["expiresAt"].get<std::string>());
  ASSERT_TRUE(expires.ok());
  EXPECT_NEAR(static_cast<double>(*expires - std::time(nullptr)), 28800, 60);
  struct stat st {};
  ASSERT_EQ(::stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // it holds the refresh token
  testing::CommandResult left = testing::RunShell("ls " + testing::ShellQuote(dir_ + "/.aws/sso/cache"));
  EXPECT_EQ(left.output, cache_.substr(cache_.rfind('/') + 1) + "\n");  // no temporary file left

  s = Upload("again");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(aws_.Count("Sso"), 2);
}

// A token with less than 15 minutes left is renewed too; where renewing it
// fails, it is used while it lasts and the cache is left as it was.
TEST_F(S3SsoRenewal, TokenAboutToExpireIsUsedWhenRenewingFails) {
  WriteCache("soon-token", 600);
  aws_.SetSsoToken("soon-token");
  aws_.SetSsoRefresh("cid", "csecret", "rt-1", "new-token", 28800, "");
  aws_.FailNext("OidcToken", 1);
  Status s = Upload("soon");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(Cache()["accessToken"], "soon-token");

  // Renewed: a reply without a new refresh token keeps the old one.
  s = Upload("renewed");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 2);
  EXPECT_EQ(Cache()["accessToken"], "new-token");
  EXPECT_EQ(Cache()["refreshToken"], "rt-1");

  // More than 15 minutes left: nothing to renew.
  WriteCache("later-token", 3600);
  aws_.SetSsoToken("later-token");
  s = Upload("later");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 2);
}

// An expired token that cannot be renewed: an error that says why and what
// to run, before the portal is asked.
TEST_F(S3SsoRenewal, ExpiredTokenThatCannotBeRenewedSaysWhy) {
  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "another-refresh-token", "new-token", 28800, "");
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  EXPECT_NE(m.find("the cached token expired at"), std::string::npos) << m;
  EXPECT_NE(m.find("renewing it failed: SSO OIDC CreateToken at " + aws_.endpoint() + ": HTTP 400 invalid_grant"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("aws sso login --profile dev"), std::string::npos) << m;
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(aws_.Count("Sso"), 0);

  // A client registration that has expired is not tried.
  WriteCache("old-token", -60, "2020-01-01T00:00:00Z");
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("its client registration expired at 2020-01-01T00:00:00Z"),
            std::string::npos)
      << config.status().message();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
}

// Two clients renewing the same expired token at once: the second's refresh
// token is spent by the time it asks, and it takes the token the first
// wrote to the cache instead of failing.
TEST_F(S3SsoRenewal, RenewalLostToAnotherClientTakesItsToken) {
  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "rt-2", "their-token", 28800, "");  // rt-1 is spent
  aws_.SetSsoToken("their-token");
  aws_.OnOidcRequest([this] {
    nlohmann::ordered_json theirs = Cache();
    theirs["accessToken"] = "their-token";
    theirs["expiresAt"] = s3::FormatIso8601(std::time(nullptr) + 28800);
    theirs["refreshToken"] = "rt-2";
    std::ofstream(cache_) << theirs.dump();
  });
  Status s = Upload("theirs");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(aws_.Count("Sso"), 1);
  EXPECT_EQ(Cache()["refreshToken"], "rt-2");  // theirs, left as it is
}

// Two vramflow runs renewing the same expired token at once (parallel
// dumps): the second waits for the first's renewal, under the lock on the
// cache directory, and takes its token, instead of sending the refresh
// token the first one's renewal spends (a rotating refresh token: the
// second CreateToken would be refused). Threads stand in for processes: a
// flock(2) lock is held per open descriptor, which each run opens itself.
TEST_F(S3SsoRenewal, ParallelRenewalsRenewOnce) {
  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "rt-1", "new-token", 28800, "rt-2");
  aws_.SetSsoToken("new-token");
  std::atomic<int> requests{0};
  // The first renewal takes a while (a slow network): the second run starts meanwhile.
  aws_.OnOidcRequest([&] {
    if (requests++ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  });
  Status results[2];
  std::thread runs[2];
  for (int i = 0; i < 2; ++i) runs[i] = std::thread([&, i] { results[i] = s3::LoadConfig(options_).status(); });
  for (std::thread& run : runs) run.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 1);
  EXPECT_EQ(aws_.Count("Sso"), 2);
  EXPECT_EQ(Cache()["accessToken"], "new-token");
  EXPECT_EQ(Cache()["refreshToken"], "rt-2");
}

// The renewal against the real aws CLI (Debian's 2.9), pointed at FakeAws
// by endpoint rule sets in AWS_DATA_PATH (it has no AWS_ENDPOINT_URL_*):
// both send the same CreateToken request and write the same cache file, and
// each takes the token the other wrote without renewing it. Two aws runs.
TEST_F(S3SsoRenewal, RenewalAgreesWithTheAwsCli) {
  if (::access("/usr/bin/aws", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/aws (scripts/setup.sh installs awscli)";
  // One rule, no conditions: every request of the service goes to FakeAws.
  const nlohmann::json region = {{"builtIn", "AWS::Region"}, {"required", false}, {"type", "String"}};
  const nlohmann::json endpoint = {
      {"url", aws_.endpoint()}, {"properties", nlohmann::json::object()}, {"headers", nlohmann::json::object()}};
  const nlohmann::json rule = {{"conditions", nlohmann::json::array()}, {"endpoint", endpoint}, {"type", "endpoint"}};
  for (const char* service : {"sso", "sso-oidc"})
    Write(std::string("awsdata/") + service + "/2019-06-10/endpoint-rule-set-1.json",
          nlohmann::json{{"version", "1.0"}, {"parameters", {{"Region", region}}}, {"rules", {rule}}}.dump());
  auto aws = [&] {
    return testing::RunShell("env -i PATH=/usr/bin:/bin HOME=" + testing::ShellQuote(dir_) +
                             " AWS_DATA_PATH=" + testing::ShellQuote(dir_ + "/awsdata") +
                             " /usr/bin/aws configure export-credentials --profile dev 2>&1");
  };
  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "rt-1", "cli-token", 28800, "rt-2");
  testing::CommandResult r = aws();
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(aws_.Count("OidcToken"), 1);
  const nlohmann::json cli_request = nlohmann::json::parse(aws_.LastOidcBody(), nullptr, false);
  const nlohmann::ordered_json cli_cache = Cache();
  ASSERT_EQ(cli_cache["accessToken"], "cli-token");

  WriteCache("old-token", -60);
  aws_.SetSsoRefresh("cid", "csecret", "rt-1", "our-token", 28800, "rt-3");
  Status s = Upload("ours");
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(aws_.Count("OidcToken"), 2);
  EXPECT_EQ(nlohmann::json::parse(aws_.LastOidcBody(), nullptr, false), cli_request);
  const nlohmann::ordered_json our_cache = Cache();
  std::vector<std::string> cli_keys, our_keys;
  for (const auto& [key, value] : cli_cache.items()) cli_keys.push_back(key);
  for (const auto& [key, value] : our_cache.items()) our_keys.push_back(key);
  EXPECT_EQ(our_keys, cli_keys);
  for (const char* same : {"startUrl", "region", "clientId", "clientSecret", "registrationExpiresAt"})
    EXPECT_EQ(our_cache[same], cli_cache[same]) << same;
  EXPECT_EQ(our_cache["refreshToken"], "rt-3");
  // Both "YYYY-MM-DDTHH:MM:SSZ", 8 hours ahead.
  EXPECT_EQ(our_cache["expiresAt"].get<std::string>().size(), cli_cache["expiresAt"].get<std::string>().size());
  EXPECT_EQ(our_cache["expiresAt"].get<std::string>().back(), 'Z');

  // The CLI takes our cache as it is: no renewal, our token at the portal
  // (once the role keys it cached in ~/.aws/cli/cache are gone).
  std::system(("rm -rf '" + dir_ + "/.aws/cli/cache'").c_str());
  const int portal = aws_.Count("Sso");
  r = aws();
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(aws_.Count("OidcToken"), 2);
  EXPECT_EQ(aws_.Count("Sso"), portal + 1);
  EXPECT_NE(r.output.find(aws_.Issued().back()), std::string::npos) << r.output;

  // And we take the CLI's.
  Write(".aws/sso/cache/" + cache_.substr(cache_.rfind('/') + 1), cli_cache.dump());
  aws_.SetSsoToken("cli-token");
  s = Upload("theirs");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("OidcToken"), 2);
}

// The fakes against an independent client, Debian's aws 2.9 (botocore):
// FakeS3's signature check accepts its requests (FakeS3ChecksSignatureAndToken
// shows it refusing wrong ones), and the aws CLI gets keys from FakeAws's IMDSv2 and container endpoint
// that FakeS3 then accepts with their tokens (IMDSv1 too, where the token
// request's reply is lost). Four aws runs: 3-8 s.
TEST_F(S3Credentials, FakesAgreeWithTheAwsCli) {
  if (::access("/usr/bin/aws", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/aws (scripts/setup.sh installs awscli)";
  std::string file = Write("up.bin", std::string(3000, 'x'));
  auto aws = [&](const std::string& env, const std::string& key) {
    return testing::RunShell("env -i PATH=/usr/bin:/bin HOME=" + testing::ShellQuote(dir_) +
                             " AWS_DEFAULT_REGION=us-east-1 " + env + " /usr/bin/aws --endpoint-url " + s3_.endpoint() +
                             " s3 cp --only-show-errors " + testing::ShellQuote(file) + " s3://bkt/" + key);
  };
  testing::CommandResult r = aws("AWS_ACCESS_KEY_ID=AKSTATIC AWS_SECRET_ACCESS_KEY=static-secret", "aws-static");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(s3_.Object("bkt/aws-static").value_or(""), std::string(3000, 'x'));

  // botocore wants the trailing slash (vramflow takes either).
  r = aws("AWS_EC2_METADATA_SERVICE_ENDPOINT=" + aws_.endpoint() + "/", "aws-imds");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(aws_.Count("ImdsToken"), 1);
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 1);
  ASSERT_EQ(aws_.Issued().size(), 1u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[0]), 0);

  // The token request's reply lost, on an instance that answers IMDSv1:
  // botocore falls back to IMDSv1 as vramflow does.
  aws_.SetImdsV1(true);
  aws_.DropNext("ImdsToken", 1);
  r = aws("AWS_EC2_METADATA_SERVICE_ENDPOINT=" + aws_.endpoint() + "/", "aws-imds-v1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(aws_.Count("ImdsToken"), 2);
  EXPECT_EQ(aws_.Count("ImdsCredentials"), 2);
  ASSERT_EQ(aws_.Issued().size(), 2u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[1]), 0);
  aws_.SetImdsV1(false);

  aws_.SetContainerToken("ecs-token");
  r =
      aws("AWS_EC2_METADATA_DISABLED=true AWS_CONTAINER_AUTHORIZATION_TOKEN=ecs-token "
          "AWS_CONTAINER_CREDENTIALS_FULL_URI=" +
              aws_.endpoint() + "/container/creds",
          "aws-container");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(aws_.Count("Container"), 1);
  ASSERT_EQ(aws_.Issued().size(), 3u);
  EXPECT_GT(s3_.SignedBy(aws_.Issued()[2]), 0);
}

// Keys that expire within seconds are fetched again before they do: an
// upload that outlives several of them is never refused.
TEST_F(S3Credentials, TemporaryKeysAreRefreshedDuringAnUpload) {
  aws_.SetLifetime(3);
  options_.credential_refresh_margin = std::chrono::seconds(2);
  aws_.SetWebIdentityToken("t");
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = Write("token", "t");
  env_["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  auto sink = OpenS3Sink("bkt", "long", options_);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<uint8_t> part(4096, 0x5a);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*sink)->Write(part).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
  Status s = (*sink)->Commit();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(s3_.Object("bkt/long")->size(), 8u * 4096);
  EXPECT_GE(aws_.Count("AssumeRoleWithWebIdentity"), 2);
  EXPECT_EQ(s3_.Rejected("ExpiredToken"), 0);
  int signers = 0;
  for (const std::string& key : aws_.Issued()) signers += s3_.SignedBy(key) > 0;
  EXPECT_GE(signers, 2);
}

// Keys that expired while STS was briefly unavailable: the request that
// needs new ones retries, and its retry gets them.
TEST_F(S3Credentials, RefreshThatFailsOnceIsRetried) {
  aws_.SetLifetime(2);
  options_.credential_refresh_margin = std::chrono::seconds(0);
  aws_.SetWebIdentityToken("t");
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = Write("token", "t");
  env_["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  auto sink = OpenS3Sink("bkt", "late", options_);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<uint8_t> part(4096, 0x33);
  ASSERT_TRUE((*sink)->Write(part).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the keys have expired
  aws_.FailNext("AssumeRoleWithWebIdentity", 1);
  ASSERT_TRUE((*sink)->Write(part).ok());
  Status s = (*sink)->Commit();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(aws_.Count("AssumeRoleWithWebIdentity"), 3);  // first keys, the 503, the new keys
  EXPECT_EQ(s3_.Object("bkt/late")->size(), 2u * 4096);
}

// A byte that drives a terminal: C0 controls (ESC, BEL, CR, LF), DEL, and
// C1 controls in UTF-8 (U+009B is CSI, as ESC [ is).
bool HasControlByte(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) return true;
  }
  return false;
}

// Every field a credential source sends is untrusted: a time zone that is
// no number, a time out of range, a key that would split a header, are
// errors naming the source, never an exception (which ended every S3
// command, and the plugin inside CRIU, with SIGABRT).
TEST_F(S3Credentials, HostileExpirationIsAnError) {
  for (const char* bad :
       {"2030-01-01T00:00:00+ab:cd", "2030-01-01T00:00:00-0x:00", "2030-01-01T00:00:00+1:000",
        "2030-01-01T00:00:00+24:00", "2030-01-01T00:00:00+05:60", "2030-01-01T-1:00:00Z", " 2030-01-01T00:00:00Z",
        "+2030-01-01T00:00:00Z", "2030-01-01T00:00:00.Z", "2030-01-01T00:00:00Zjunk", "2030-02-30T00:00:00Z",
        "2030-01-01T00:00:61Z", "2030-01-01 00:00:00Z", "2030-01-01T00:00:00+\x1b[31m", ""}) {
    SCOPED_TRACE(bad);
    Result<std::time_t> t = s3::ParseIso8601(bad);
    EXPECT_FALSE(t.ok());
    if (!t.ok()) {
      EXPECT_FALSE(HasControlByte(t.status().message())) << t.status().message();
    }
  }
  Result<std::time_t> offset = s3::ParseIso8601("2030-01-01T01:30:00.25+01:30");
  ASSERT_TRUE(offset.ok()) << offset.status().ToString();
  EXPECT_EQ(s3::FormatIso8601(*offset), "2030-01-01T00:00:00Z");
  Result<std::time_t> leap = s3::ParseIso8601("2028-02-29T23:59:59-00:00");
  ASSERT_TRUE(leap.ok()) << leap.status().ToString();
  EXPECT_EQ(s3::FormatIso8601(*leap), "2028-02-29T23:59:59Z");

  const std::string expiration = "2030-01-01T00:00:00+ab:cd";
  Result<s3::TimedCredentials> sts = s3::ParseStsReply(
      200,
      "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>AK</AccessKeyId><SecretAccessKey>s"
      "</SecretAccessKey><Expiration>" +
          expiration +
          "</Expiration></Credentials></AssumeRoleResult>"
          "</AssumeRoleResponse>",
      "STS");
  ASSERT_FALSE(sts.ok());
  EXPECT_NE(sts.status().message().find("time zone"), std::string::npos) << sts.status().message();

  // Through the chain: credential_process, the container endpoint, IMDS.
  const std::string json =
      "{\"Version\": 1, \"AccessKeyId\": \"AK\", \"SecretAccessKey\": \"s\", \"Expiration\": \"" + expiration + "\"}";
  Write(".aws/config", "[default]\ncredential_process = printf '%s' '" + json + "'\n");
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("credential_process of profile 'default'"), std::string::npos)
      << config.status().message();
  EXPECT_NE(config.status().message().find("time zone"), std::string::npos) << config.status().message();
  Write(".aws/config", "");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = aws_.endpoint() + "/container/creds";
  aws_.AnswerNext("Container", 200, json);
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("time zone"), std::string::npos) << config.status().message();
  env_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = aws_.endpoint();
  aws_.AnswerNext("ImdsCredentials", 200, json);
  config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("time zone"), std::string::npos) << config.status().message();
}

// Keys that a header could not carry, and a Version that is 1 only when
// cut to an int, are refused.
TEST_F(S3Credentials, HostileCredentialFieldsAreRefused) {
  for (const char* fields :
       {R"("AccessKeyId": "AK\r\nX-Injected: 1", "SecretAccessKey": "s")",
        R"("AccessKeyId": "AK", "SecretAccessKey": "s", "SessionToken": "t\nX-Injected: 1")",
        R"("AccessKeyId": "AK", "SecretAccessKey": "s", "Token": "t\u001b[2J")",
        R"("AccessKeyId": "A K", "SecretAccessKey": "s")", R"("AccessKeyId": "AK", "SecretAccessKey": "s\u0000x")"}) {
    SCOPED_TRACE(fields);
    Result<s3::TimedCredentials> parsed = s3::ParseCredentialJson(std::string("{") + fields + "}", "container");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find("container: "), std::string::npos) << parsed.status().message();
    EXPECT_FALSE(HasControlByte(parsed.status().message())) << parsed.status().message();
  }
  Result<s3::TimedCredentials> sts = s3::ParseStsReply(
      200,
      "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>AK</AccessKeyId><SecretAccessKey>s"
      "</SecretAccessKey><SessionToken>t&#13;&#10;X: 1</SessionToken></Credentials></AssumeRoleResult>"
      "</AssumeRoleResponse>",
      "STS");
  EXPECT_FALSE(sts.ok());
  auto v =
      s3::RunCredentialProcess("echo '{\"Version\": 4294967297, \"AccessKeyId\": \"a\", \"SecretAccessKey\": \"b\"}'");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("Version"), std::string::npos) << v.status().message();
}

// What S3, STS, IMDS, a container endpoint and a credential_process say is
// shown escaped: it cannot clear the screen or forge a line of its own.
TEST_F(S3Credentials, PeerTextIsEscaped) {
  const std::string forged = "\x1b[2J\a\rvramflow pack: done\n";
  auto expect_escaped = [](const Status& s, const char* where, const char* escaped = "\\x1b[2J") {
    SCOPED_TRACE(where);
    ASSERT_FALSE(s.ok());
    EXPECT_FALSE(HasControlByte(s.message())) << s.message();
    EXPECT_NE(s.message().find(escaped), std::string::npos) << s.message();
  };
  // XML holds no ESC, but CR (as a reference), LF and C1 controls such as CSI.
  const std::string forged_xml = "&#x9b;2J&#13;vramflow pack: done&#10;";
  // S3's own error reply (the fake answers whatever comes as S3).
  env_["AWS_ACCESS_KEY_ID"] = "AKSTATIC";
  env_["AWS_SECRET_ACCESS_KEY"] = "static-secret";
  options_.endpoint = aws_.endpoint();
  options_.overwrite = true;
  aws_.AnswerNext("Other", 400,
                  "<Error><Code>Bad" + forged_xml + "</Code><Message>" + forged_xml + "</Message></Error>");
  expect_escaped(Upload("x"), "S3", "\\x0d");
  env_.erase("AWS_ACCESS_KEY_ID");
  env_.erase("AWS_SECRET_ACCESS_KEY");

  // STS's error reply.
  aws_.SetWebIdentityToken("t");
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = Write("token", "t");
  env_["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  aws_.AnswerNext("AssumeRoleWithWebIdentity", 403,
                  "<ErrorResponse><Error><Code>" + forged_xml + "</Code><Message>" + forged_xml +
                      "</Message></Error>"
                      "</ErrorResponse>");
  expect_escaped(s3::LoadConfig(options_).status(), "STS", "\\x0d");
  env_.erase("AWS_WEB_IDENTITY_TOKEN_FILE");

  // The container endpoint's error body, and its JSON's Message.
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = aws_.endpoint() + "/container/creds";
  aws_.AnswerNext("Container", 500, forged);
  expect_escaped(s3::LoadConfig(options_).status(), "container HTTP 500");
  aws_.AnswerNext("Container", 200, nlohmann::json{{"Code", "x"}, {"Message", forged}}.dump());
  expect_escaped(s3::LoadConfig(options_).status(), "container Message");
  env_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");

  // IMDS's role name.
  env_.erase("AWS_EC2_METADATA_DISABLED");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = aws_.endpoint();
  aws_.AnswerNext("ImdsRole", 200, "\x1b[2Jrole\a\r");
  expect_escaped(s3::LoadConfig(options_).status(), "IMDS role");
  env_["AWS_EC2_METADATA_DISABLED"] = "true";

  // credential_process: what it writes to stderr when it fails, and its JSON's Message.
  std::string script = Write("fail.sh", "#!/bin/sh\nprintf '\\033[2J\\a\\rvramflow pack: done\\n' >&2\nexit 1\n");
  ::chmod(script.c_str(), 0755);
  Write(".aws/config", "[default]\ncredential_process = " + script + "\n");
  expect_escaped(s3::LoadConfig(options_).status(), "credential_process stderr");
  Write(".aws/config", "[default]\ncredential_process = printf '{\"Version\": 1, \"Message\": \"\\\\u001b[2J\"}'\n");
  expect_escaped(s3::LoadConfig(options_).status(), "credential_process Message");
}

// Errors name a credential_process by its profile: its command line may
// carry a secret.
TEST_F(S3Credentials, CredentialProcessCommandLineIsNotShown) {
  Write(".aws/config",
        "[profile failing]\ncredential_process = sh -c 'exit 3' --token=SECRET-TOKEN-7\n"
        "[profile slow]\ncredential_process = sleep 5 --token=SECRET-TOKEN-7\n");
  options_.profile = "failing";
  auto config = s3::LoadConfig(options_);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("credential_process of profile 'failing'"), std::string::npos)
      << config.status().message();
  EXPECT_NE(config.status().message().find("exited with status 3"), std::string::npos) << config.status().message();
  EXPECT_EQ(config.status().message().find("SECRET-TOKEN-7"), std::string::npos) << config.status().message();
}

// SIGTERM ends `vramflow` and the credential_process it is waiting for,
// with whatever that started (its process group).
TEST_F(S3Credentials, SigtermKillsTheCredentialProcessTree) {
  const std::string pids = dir_ + "/pids";
  std::string script = Write(
      "slow.sh", "#!/bin/sh\nsleep 30 &\necho $$ $! > " + pids + ".tmp\nmv " + pids + ".tmp " + pids + "\nwait\n");
  ::chmod(script.c_str(), 0755);
  Write(".aws/config", "[default]\ncredential_process = " + script + "\n");
  Write("input", "some bytes to pack");
  std::vector<std::string> env = {"HOME=" + dir_, "AWS_EC2_METADATA_DISABLED=true"};
  for (const char* unset :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
        "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "XDG_STATE_HOME"})
    env.push_back(std::string(unset) + "=");
  const std::vector<std::string> args = {"pack",           "-q",          dir_ + "/input", "-o", "s3://bkt/sigterm.vfs",
                                         "--endpoint-url", s3_.endpoint()};
  testing::CliChild pack(VRAMFLOW_BINARY, args, dir_ + "/pack.log", -1, env);
  pid_t shell = 0, sleeper = 0;
  for (int i = 0; i < 500 && !(std::ifstream(pids) >> shell >> sleeper); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(sleeper, 0) << "the credential_process never started: " << pack.Log();
  pack.Kill(SIGTERM);
  EXPECT_EQ(pack.Wait(std::chrono::seconds(15)), 143) << pack.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // reaping by init may lag
  for (pid_t pid : {shell, sleeper}) {
    bool alive =
        ::kill(pid, 0) == 0 && testing::RunShell("ps -o stat= -p " + std::to_string(pid) + " | grep -qv Z").code == 0;
    EXPECT_FALSE(alive) << "process " << pid << " of the credential_process outlived vramflow";
    if (alive) ::kill(pid, SIGKILL);
  }
}

}  // namespace
}  // namespace vramflow
