// SPDX-License-Identifier: MIT
// Unit tests of the s3:// pieces that need no server: SigV4 against AWS's
// published examples, settings resolution, the part-size schedule, reply
// parsing, s3:// URIs and the server-side encryption settings and headers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "transport/aws/sigv4.h"
#include "transport/aws/xml.h"
#include "transport/core/uri.h"
#include "transport/s3/s3_config.h"
#include "transport/s3/s3_encryption.h"
#include "transport/s3/s3_part_plan.h"

namespace vramflow::s3 {
namespace {

// The worked examples of "Signature Calculations for the Authorization
// Header: Transferring Payload in a Single Chunk (AWS Signature Version
// 4)", S3 API reference: same keys, time and bucket for all.
const Credentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kExampleDate = "20130524T000000Z";
constexpr const char* kExampleHost = "examplebucket.s3.amazonaws.com";

std::string SignatureOf(const std::string& authorization) {
  return authorization.substr(authorization.find("Signature=") + 10);
}

//! "Example: GET Object": a Range header, empty payload hash.
TEST(S3Signer, AwsExampleGetObject) {
  SignRequest r{"GET", "/test.txt", {}, {}, std::string(kEmptySha256)};
  r.headers = {{"Host", kExampleHost},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", std::string(kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_EQ(Authorization(kExampleCredentials, "us-east-1", kExampleDate, r),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

//! "Example: PUT Object": a signed payload and a '$' the path must encode.
TEST(S3Signer, AwsExamplePutObject) {
  std::string payload_hash = Sha256Hex(std::string_view("Welcome to Amazon S3."));
  EXPECT_EQ(payload_hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  std::string path = "/" + UriEncode("test$file.text", true);
  EXPECT_EQ(path, "/test%24file.text");
  SignRequest r{"PUT", path, {}, {}, payload_hash};
  r.headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"Host", kExampleHost},
               {"x-amz-content-sha256", payload_hash},
               {"x-amz-date", kExampleDate},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  std::string auth = Authorization(kExampleCredentials, "us-east-1", kExampleDate, r);
  EXPECT_NE(auth.find("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"),
            std::string::npos);
  EXPECT_EQ(SignatureOf(auth), "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

//! "Example: GET Bucket Lifecycle" and "Get Bucket (List Objects)": query
//! strings, an empty value, sorting.
TEST(S3Signer, AwsExampleQueries) {
  auto sign = [](std::vector<std::pair<std::string, std::string>> query) {
    SignRequest r{"GET", "/", std::move(query), {}, std::string(kEmptySha256)};
    r.headers = {
        {"Host", kExampleHost}, {"x-amz-content-sha256", std::string(kEmptySha256)}, {"x-amz-date", kExampleDate}};
    return SignatureOf(Authorization(kExampleCredentials, "us-east-1", kExampleDate, r));
  };
  EXPECT_EQ(sign({{"lifecycle", ""}}), "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
  EXPECT_EQ(sign({{"prefix", "J"}, {"max-keys", "2"}}),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

//! The ETag of an object completed from parts: MD5 of the parts' MD5s
//! (here of "abc" and "def", as Python's hashlib computes it) and "-N";
//! none where a part's ETag is not an MD5 (SSE-KMS parts).
TEST(S3Signer, MultipartETag) {
  EXPECT_EQ(MultipartETag({"\"900150983cd24fb0d6963f7d28e17f72\"", "\"4ED9407630EB1000C0F6B63842DEFA7D\""}),
            "\"4c8e93283780e078db9e0c6b9b3f8043-2\"");
  EXPECT_EQ(MultipartETag({}), "");
  EXPECT_EQ(MultipartETag({"900150983cd24fb0d6963f7d28e17f72"}), "");        // not quoted
  EXPECT_EQ(MultipartETag({"\"900150983cd24fb0d6963f7d28e17f7g\""}), "");    // not hex
  EXPECT_EQ(MultipartETag({"\"900150983cd24fb0d6963f7d28e17f72-2\""}), "");  // a multipart ETag
  EXPECT_EQ(MultipartETag({"\"\""}), "");
}

TEST(S3Signer, HashesAndEncoding) {
  EXPECT_EQ(Sha256Hex(std::string_view("")), kEmptySha256);
  std::string empty;
  EXPECT_EQ(Md5Base64(std::span<const uint8_t>()), "1B2M2Y8AsgTpgAmY7PhCfg==");  // RFC 1864 style, MD5("")
  EXPECT_EQ(Md5Hex(std::span<const uint8_t>()), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(UriEncode("a b/c~d=e+f", true), "a%20b/c~d%3De%2Bf");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z");
  EXPECT_EQ(CanonicalQuery({{"uploadId", "a/b c"}, {"partNumber", "3"}}), "partNumber=3&uploadId=a%2Fb%20c");
}

// --- Settings -----------------------------------------------------------

class S3ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vf-s3-config-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_["HOME"] = dir_;
    env_["AWS_EC2_METADATA_DISABLED"] = "true";  // no probe of 169.254.169.254
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  void Write(const std::string& name, const std::string& text) {
    std::system(("mkdir -p '" + dir_ + "/.aws'").c_str());
    std::ofstream(dir_ + "/" + name) << text;
  }
  Result<Config> Load(S3Options options = {}) {
    options.getenv = [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
    return LoadConfig(options);
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(S3ConfigTest, EnvironmentCredentialsAndDefaults) {
  env_["AWS_ACCESS_KEY_ID"] = "AK";
  env_["AWS_SECRET_ACCESS_KEY"] = "SK";
  env_["AWS_SESSION_TOKEN"] = "TOK";
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "AK");
  EXPECT_EQ(c->credentials->Get()->secret_key, "SK");
  EXPECT_EQ(c->credentials->Get()->session_token, "TOK");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->scheme, "https");
  EXPECT_EQ(c->host, "s3.us-east-1.amazonaws.com");
  EXPECT_FALSE(c->path_style);  // AWS: virtual-host style

  env_["AWS_DEFAULT_REGION"] = "eu-west-1";
  EXPECT_EQ(Load()->host, "s3.eu-west-1.amazonaws.com");
  env_["AWS_REGION"] = "eu-central-1";  // wins over AWS_DEFAULT_REGION
  EXPECT_EQ(Load()->region, "eu-central-1");

  env_["AWS_ENDPOINT_URL"] = "http://127.0.0.1:7480/";
  c = Load();
  EXPECT_EQ(c->scheme, "http");
  EXPECT_EQ(c->host, "127.0.0.1:7480");
  EXPECT_TRUE(c->path_style);  // custom endpoint: path style
  env_["AWS_ENDPOINT_URL_S3"] = "https://s3.example.com";
  EXPECT_EQ(Load()->host, "s3.example.com");
  env_["VRAMFLOW_S3_ADDRESSING"] = "virtual";
  EXPECT_FALSE(Load()->path_style);
  env_["VRAMFLOW_S3_ADDRESSING"] = "sideways";
  EXPECT_EQ(Load().status().code(), Status::Code::kInvalidArgument);
  env_["VRAMFLOW_S3_ADDRESSING"] = "";
  env_["AWS_ENDPOINT_URL_S3"] = "ftp://x";
  EXPECT_FALSE(Load().ok());
}

TEST_F(S3ConfigTest, ProfilesFromTheCliFiles) {
  Write(".aws/credentials",
        "# comment\n[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFSECRET\n\n"
        "[work]\naws_access_key_id=WORK\naws_secret_access_key=WORKSECRET\naws_session_token = T\n");
  Write(".aws/config",
        "[default]\nregion = ap-south-1\n[profile work]\nregion = us-west-2\ns3 =\n  addressing_style = path\n"
        "  endpoint_url = http://10.0.0.1:9000\n[profile cfgonly]\naws_access_key_id = C\n"
        "aws_secret_access_key = CS\nendpoint_url = http://h:1\n");
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "DEF");
  EXPECT_EQ(c->region, "ap-south-1");
  EXPECT_NE(c->credentials_source.find("profile 'default'"), std::string::npos);

  env_["AWS_PROFILE"] = "work";
  c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "WORK");
  EXPECT_EQ(c->credentials->Get()->session_token, "T");
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(c->host, "10.0.0.1:9000");
  EXPECT_TRUE(c->path_style);

  env_["AWS_PROFILE"] = "cfgonly";  // credentials in the config file only
  c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "C");
  EXPECT_EQ(c->host, "h:1");

  // Files named by the environment.
  Write("creds2", "[default]\naws_access_key_id = ALT\naws_secret_access_key = ALTS\n");
  env_["AWS_PROFILE"] = "";
  env_["AWS_SHARED_CREDENTIALS_FILE"] = dir_ + "/creds2";
  env_["AWS_CONFIG_FILE"] = dir_ + "/nonexistent";
  c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "ALT");
  EXPECT_EQ(c->region, "us-east-1");

  // The environment wins over every file.
  env_["AWS_ACCESS_KEY_ID"] = "ENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "ENVS";
  EXPECT_EQ(Load()->credentials->Get()->access_key, "ENV");
}

// botocore's order among the sources a profile may name (see
// transport/aws/credential_chain.h): credentials file, then credential_process, then
// the config file's keys; a named profile that exists nowhere is an error
// even where the environment has keys (as `aws` says "could not be found").
TEST_F(S3ConfigTest, ChainOrderWithinAProfile) {
  Write(".aws/config",
        "[default]\ncredential_process = echo '{\"Version\": 1, \"AccessKeyId\": \"PROC\", "
        "\"SecretAccessKey\": \"PS\"}'\naws_access_key_id = CFG\naws_secret_access_key = CS\n");
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->Get()->access_key, "PROC");
  EXPECT_NE(c->credentials_source.find("credential_process"), std::string::npos) << c->credentials_source;
  Write(".aws/credentials", "[default]\naws_access_key_id = CRED\naws_secret_access_key = CRS\n");
  EXPECT_EQ(Load()->credentials->Get()->access_key, "CRED");
  env_["AWS_ACCESS_KEY_ID"] = "ENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "ENVS";
  EXPECT_EQ(Load()->credentials->Get()->access_key, "ENV");
  S3Options named;
  named.profile = "default";  // --profile default: the profile, not the environment
  EXPECT_EQ(Load(named)->credentials->Get()->access_key, "CRED");
  env_["AWS_PROFILE"] = "nobody";
  c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("profile 'nobody' is in neither"), std::string::npos) << c.status().message();
  // An SSO profile missing its settings says which it needs.
  Write(".aws/config", "[profile sso]\nsso_start_url = https://x.awsapps.com/start\nsso_role_name = r\n");
  env_.erase("AWS_ACCESS_KEY_ID");
  env_["AWS_PROFILE"] = "sso";
  c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SSO profile 'sso' needs sso_start_url, sso_region"), std::string::npos)
      << c.status().message();
}

TEST_F(S3ConfigTest, MissingCredentialsSayWhatToSet) {
  env_["AWS_PROFILE"] = "nobody";
  auto c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("'nobody'"), std::string::npos) << c.status().message();
}

// --- Part sizes ---------------------------------------------------------

//! S3 limits: the schedule from the smallest first part reaches beyond
//! 5 TiB within 10,000 parts, no part is above 5 GiB, sizes never shrink.
TEST(S3PartPlan, ReachesBeyondFiveTebibytes) {
  S3Limits limits;
  PartPlan plan(0, limits);  // clamped up to 5 MiB
  EXPECT_EQ(plan.first(), 5ull << 20);
  EXPECT_EQ(plan.PartSize(1), 5ull << 20);
  EXPECT_EQ(plan.PartSize(625), 5ull << 20);
  EXPECT_EQ(plan.PartSize(626), 10ull << 20);
  uint64_t previous = 0;
  for (uint32_t n = 1; n <= limits.max_parts; ++n) {
    ASSERT_GE(plan.PartSize(n), previous);
    ASSERT_LE(plan.PartSize(n), limits.max_part_size);
    previous = plan.PartSize(n);
  }
  EXPECT_GT(plan.Capacity(limits.max_parts), 5ull << 40);
  EXPECT_EQ(plan.PartSize(limits.max_parts), limits.max_part_size);
  // A first part of 5 GiB stays there.
  EXPECT_EQ(PartPlan(10ull << 30, limits).PartSize(1), 5ull << 30);
}

//! A small simulated limit: a stream longer than first part x max parts
//! still fits, because parts grow.
TEST(S3PartPlan, SmallSimulatedLimitsGrow) {
  S3Limits limits{1024, 1 << 20, 8};
  PartPlan plan(1024, limits);
  EXPECT_EQ(plan.PartSize(1), 1024u);
  EXPECT_EQ(plan.PartSize(2), 2048u);
  EXPECT_GT(plan.Capacity(8), 100u * 1024);
  EXPECT_GT(plan.Capacity(8), 8u * 1024);
}

TEST(S3PartPlan, FirstPartFromTheBudget) {
  S3Options o;
  o.memory_budget = 64ull << 20;
  o.concurrency = 7;
  EXPECT_EQ(FirstPartSize(o), 8ull << 20);  // 8 buffers of 8 MiB
  o.memory_budget = 1 << 20;                // too small: the S3 minimum wins
  EXPECT_EQ(FirstPartSize(o), 5ull << 20);
  o.part_size = 12345678;
  EXPECT_EQ(FirstPartSize(o), 12345678u);
  EXPECT_EQ(Concurrency(S3Options{}), 8u);
}

// --- Replies ------------------------------------------------------------

TEST(S3Xml, FieldsAndErrors) {
  std::string init =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>2~abc&amp;def</UploadId></InitiateMultipartUploadResult>";
  EXPECT_EQ(XmlField(init, "UploadId").value_or("?"), "2~abc&def");
  EXPECT_FALSE(XmlField(init, "ETag").has_value());

  EXPECT_EQ(XmlField("<R><ETag></ETag></R>", "ETag").value_or("?"), "");  // Ceph RGW 16
  EXPECT_EQ(XmlField("<R><ETag/></R>", "ETag").value_or("?"), "");
  EXPECT_EQ(XmlField("<R><ETagX>1</ETagX><ETag>&quot;x-2&quot;</ETag></R>", "ETag").value_or("?"), "\"x-2\"");
  EXPECT_EQ(XmlFields("<L><Key>a</Key><Key>b/c</Key></L>", "Key"), (std::vector<std::string>{"a", "b/c"}));

  auto e = ParseError(
      "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated "
      "does not match</Message><RequestId>r</RequestId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "SignatureDoesNotMatch");
  EXPECT_EQ(e->message, "The request signature we calculated does not match");
  EXPECT_FALSE(ParseError(init).has_value());
  EXPECT_EQ(XmlEscape("\"a\"<&>"), "\"a\"&lt;&amp;&gt;");
  EXPECT_EQ(XmlField("<R><V>&lt;&#65;&#x42;&amp;</V></R>", "V").value_or("?"), "<AB&");
}

// What string search got wrong: fields in comments, CDATA, attributes;
// malformed documents; entity bombs and unbounded nesting.
TEST(S3Xml, ParsedAsXmlNotSearched) {
  // A comment or an attribute that looks like the field is not the field.
  EXPECT_EQ(XmlField("<R><!-- <UploadId>fake</UploadId> --><UploadId>real</UploadId></R>", "UploadId").value_or("?"),
            "real");
  EXPECT_EQ(XmlField("<R a=\"<UploadId>x</UploadId>\"><UploadId>y</UploadId></R>", "UploadId").value_or("?"), "?");
  EXPECT_EQ(XmlField("<R><K><![CDATA[a<b>&c]]></K></R>", "K").value_or("?"), "a<b>&c");
  // Truncated or malformed: no field, and ParseXml says where.
  EXPECT_FALSE(XmlField("<R><UploadId>abc</UploadId>", "UploadId").has_value());
  auto bad = ParseXml("<R>\n<A></B></R>");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  // No DOCTYPE, so no entity expansion (billion laughs).
  auto bomb = ParseXml("<!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;\">]><r>&b;</r>");
  ASSERT_FALSE(bomb.ok());
  EXPECT_NE(bomb.status().message().find("DOCTYPE"), std::string::npos) << bomb.status().message();
  // Bounded depth and size.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "<a>";
  auto too_deep = ParseXml(deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("deeper"), std::string::npos) << too_deep.status().message();
  EXPECT_FALSE(ParseXml("<a>" + std::string(kMaxXmlBytes, 'x') + "</a>").ok());
  // STS wraps its error in <ErrorResponse>.
  auto sts = ParseError(
      "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>"
      "<Code>InvalidIdentityToken</Code><Message>bad token</Message></Error></ErrorResponse>");
  ASSERT_TRUE(sts.has_value());
  EXPECT_EQ(sts->code, "InvalidIdentityToken");
  EXPECT_EQ(sts->message, "bad token");
}

// --- URIs ---------------------------------------------------------------

TEST(S3Uri, BucketAndKey) {
  auto e = ParseEndpoint("s3://my-bucket.v2/dumps/2024/ckpt.vfs");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->kind, Endpoint::Kind::kS3);
  EXPECT_EQ(e->bucket, "my-bucket.v2");
  EXPECT_EQ(e->key, "dumps/2024/ckpt.vfs");
  EXPECT_FALSE(e->is_network());
  EXPECT_EQ(ParseEndpoint("S3://abc/k")->kind, Endpoint::Kind::kS3);
  for (const char* bad : {"s3://", "s3://bucket", "s3://bucket/", "s3:///key", "s3://ab/k", "s3://Bucket/k",
                          "s3://b_x/k", "s3://bucket/k?x=1"}) {
    auto r = ParseEndpoint(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

// --- Server-side encryption ---------------------------------------------

//! --sse, --sse-kms-key-id and --sse-c-key: only modes that go together.
TEST(S3Encryption, ModesThatDoNotGoTogetherAreRefused) {
  EXPECT_TRUE(CheckEncryptionModes("", "", false).ok());
  EXPECT_TRUE(CheckEncryptionModes("AES256", "", false).ok());
  EXPECT_TRUE(CheckEncryptionModes("aws:kms", "", false).ok());
  EXPECT_TRUE(CheckEncryptionModes("aws:kms", "alias/ckpt", false).ok());
  EXPECT_TRUE(CheckEncryptionModes("", "", true).ok());
  Status s = CheckEncryptionModes("aes256", "", false);
  EXPECT_EQ(s.message(), "--sse: 'aes256' is neither AES256 (SSE-S3) nor aws:kms (SSE-KMS)");
  s = CheckEncryptionModes("AES256", "alias/ckpt", false);
  EXPECT_EQ(s.message(), "--sse-kms-key-id needs --sse aws:kms");
  s = CheckEncryptionModes("aws:kms", "", true);
  EXPECT_NE(s.message().find("--sse-c-key and --sse cannot go together"), std::string::npos) << s.ToString();
}

//! An SSE-C key goes with every request: over https, or over http only to
//! this machine's loopback.
TEST(S3Encryption, ACustomerKeyGoesOverHttpsOrToThisMachineOnly) {
  S3Encryption e;
  e.customer_key = std::string(32, 'k');
  for (const char* host : {"s3.eu-west-1.amazonaws.com", "10.0.0.5:7480"})
    EXPECT_TRUE(CheckEncryption(e, "https", host).ok()) << host;
  for (const char* host : {"127.0.0.1:7480", "127.1.2.3", "[::1]:9000", "localhost:9000"})
    EXPECT_TRUE(CheckEncryption(e, "http", host).ok()) << host;
  for (const char* host : {"10.0.0.5:7480", "s3.example.com", "127.example.com:80", "[fd00::1]:80"}) {
    Status s = CheckEncryption(e, "http", host);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << host;
    EXPECT_NE(s.message().find("is not https"), std::string::npos) << s.ToString();
  }
  e.customer_key.pop_back();
  EXPECT_EQ(CheckEncryption(e, "https", "s3.amazonaws.com").message(), "--sse-c-key: the key is 31 bytes, not 32");
}

//! The headers per request kind; the key's base64 and MD5 as `openssl`
//! computes them for the bytes 0..31 (base64; openssl md5 -binary | base64).
TEST(S3Encryption, HeadersNameTheModeAndCarryTheKeyWithItsDigest) {
  S3Encryption kms;
  kms.sse = "aws:kms";
  kms.kms_key_id = "alias/ckpt";
  Headers headers;
  AddCreateHeaders(kms, &headers);
  EXPECT_EQ(headers, (Headers{{"x-amz-server-side-encryption", "aws:kms"},
                              {"x-amz-server-side-encryption-aws-kms-key-id", "alias/ckpt"}}));
  headers.clear();
  AddCustomerKeyHeaders(kms, &headers);  // SSE-KMS: nothing on reads and parts
  EXPECT_TRUE(headers.empty());

  S3Encryption customer;
  for (int i = 0; i < 32; ++i) customer.customer_key.push_back(static_cast<char>(i));
  const Headers key_headers{
      {"x-amz-server-side-encryption-customer-algorithm", "AES256"},
      {"x-amz-server-side-encryption-customer-key", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
      {"x-amz-server-side-encryption-customer-key-MD5", "tP/LI3N87DFaSk0aoqYgzg=="}};
  AddCustomerKeyHeaders(customer, &headers);
  EXPECT_EQ(headers, key_headers);
  headers.clear();
  AddCreateHeaders(customer, &headers);
  EXPECT_EQ(headers, key_headers);
  headers.clear();
  AddCreateHeaders(S3Encryption{}, &headers);
  EXPECT_TRUE(headers.empty());
}

//! A creating request's reply must echo the mode asked for (Ceph RGW 16
//! leaves AES256 out: it ignores it).
TEST(S3Encryption, RepliesThatDoNotEchoTheModeAreRefused) {
  S3Encryption sse_s3;
  sse_s3.sse = "AES256";
  Response reply;
  Status s = CheckApplied(sse_s3, reply);
  EXPECT_EQ(s.message(),
            "S3 did not confirm the server-side encryption asked for: its reply has no "
            "'x-amz-server-side-encryption: AES256'");
  reply.headers["x-amz-server-side-encryption"] = "aws:kms";
  EXPECT_FALSE(CheckApplied(sse_s3, reply).ok());
  reply.headers["x-amz-server-side-encryption"] = "AES256";
  EXPECT_TRUE(CheckApplied(sse_s3, reply).ok());
  S3Encryption customer;
  customer.customer_key = std::string(32, 'k');
  EXPECT_FALSE(CheckApplied(customer, Response{}).ok());
  reply.headers["x-amz-server-side-encryption-customer-algorithm"] = "AES256";
  EXPECT_TRUE(CheckApplied(customer, reply).ok());
  EXPECT_TRUE(CheckApplied(S3Encryption{}, Response{}).ok());
}

//! LoadConfig refuses an SSE-C key for an http endpoint on another machine.
TEST_F(S3ConfigTest, AnSseCKeyIsRefusedForAnHttpEndpointElsewhere) {
  env_["AWS_ACCESS_KEY_ID"] = "AKIDEXAMPLE";
  env_["AWS_SECRET_ACCESS_KEY"] = "secret";
  S3Options options;
  options.encryption.customer_key = std::string(32, 'k');
  options.endpoint = "http://192.0.2.10:7480";
  Result<Config> config = Load(options);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--sse-c-key: the endpoint http://192.0.2.10:7480 is not https"),
            std::string::npos)
      << config.status().ToString();
  options.endpoint = "http://127.0.0.1:7480";
  EXPECT_TRUE(Load(options).ok());
}

//! Key files: 32 raw bytes (whatever they are, a line end included), or
//! their base64 with or without a line end; anything else is refused,
//! naming the file.
TEST_F(S3ConfigTest, SseCKeyFilesHoldTheKeyRawOrInBase64) {
  std::string raw;
  for (int i = 0; i < 31; ++i) raw.push_back(static_cast<char>(i));
  raw.push_back('\n');  // a raw key may end in 0x0a: 32 bytes are taken as they are
  const std::string base64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
  std::string bytes_0_31;
  for (int i = 0; i < 32; ++i) bytes_0_31.push_back(static_cast<char>(i));
  auto load = [&](const std::string& content) {
    std::ofstream(dir_ + "/key", std::ios::binary | std::ios::trunc) << content;
    return LoadCustomerKey(dir_ + "/key");
  };
  for (const auto& [content, key] :
       {std::pair{raw, raw}, {base64, bytes_0_31}, {base64 + "\n", bytes_0_31}, {base64 + "\r\n", bytes_0_31}}) {
    Result<std::string> loaded = load(content);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(*loaded, key);
  }
  const std::vector<std::string> refused = {raw.substr(0, 31),
                                            raw + "x",
                                            base64.substr(0, 43),
                                            std::string(44, '='),
                                            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",
                                            std::string(100, 'a')};
  for (const std::string& bad : refused) {
    Result<std::string> loaded = load(bad);
    ASSERT_FALSE(loaded.ok()) << bad;
    EXPECT_NE(loaded.status().message().find("SSE-C key file '" + dir_ + "/key': "), std::string::npos)
        << loaded.status().ToString();
    EXPECT_NE(loaded.status().message().find("neither a key of 32 bytes nor their base64"), std::string::npos)
        << loaded.status().ToString();
  }
  Result<std::string> missing = LoadCustomerKey(dir_ + "/absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir_ + "/absent"), std::string::npos) << missing.status().ToString();
}

}  // namespace
}  // namespace vramflow::s3
