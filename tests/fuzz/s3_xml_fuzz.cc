// SPDX-License-Identifier: MIT
// libFuzzer target: S3's and STS's XML replies as vramflow parses them
// (transport/aws/xml.h on expat: UploadId, ETag, keys, error code and message,
// STS credentials).
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR the binary writes typical replies into
// DIR and exits.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "transport/aws/xml.h"

namespace {

void WriteSeeds(const std::string& dir) {
  const char* seeds[] = {
      "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>2~abc&amp;def</UploadId></InitiateMultipartUploadResult>",
      "<CompleteMultipartUploadResult><Location>l</Location><ETag>&quot;0123-4&quot;</ETag>"
      "</CompleteMultipartUploadResult>",
      "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
      "<ListBucketResult><Contents><Key>a</Key></Contents><Contents><Key>b&lt;c</Key></Contents></ListBucketResult>",
      "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>A</AccessKeyId>"
      "<SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2026-01-01T00:00:00Z"
      "</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
      "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>m</Message></Error></ErrorResponse>",
  };
  int i = 0;
  for (const char* s : seeds) std::ofstream(dir + "/seed" + std::to_string(i++)) << s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vramflow::s3;
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  (void)XmlField(xml, "UploadId");
  (void)XmlField(xml, "ETag");
  (void)XmlFields(xml, "Key");
  (void)ParseError(xml);
  vramflow::Result<XmlElement> doc = ParseXml(xml);
  if (doc.ok()) {
    // Text we escape reads back unchanged from a document we build.
    std::string text = doc->text;
    std::optional<std::string> back = XmlField("<v>" + XmlEscape(text) + "</v>", "v");
    if (back && *back != text) std::abort();
  }
  return 0;
}
