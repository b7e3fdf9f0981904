// SPDX-License-Identifier: MIT
// libFuzzer target: what AWS credential sources send, as vramflow parses it
// (transport/aws/credentials.h, credential_process.h, sts.h): the
// JSON of the container endpoint and instance metadata, a
// credential_process's output, STS's XML replies (credentials and errors),
// and the Expiration time in all of them. The first byte picks the parser,
// the rest is the input.
//
// Checked besides memory safety: nothing throws; keys that are accepted
// pass CheckCredentials; no error message holds a control byte (the
// source's text is escaped); a canonical time reads back as written.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR the binary writes typical inputs into
// DIR and exits.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "transport/aws/credential_process.h"
#include "transport/aws/credentials.h"
#include "transport/aws/sts.h"

namespace {

using vramflow::Result;
using vramflow::Status;
using vramflow::s3::TimedCredentials;

void WriteSeeds(const std::string& dir) {
  const std::string json = R"({"Code":"Success","AccessKeyId":"ASIA1","SecretAccessKey":"s/k+1","Token":"t==",)"
                           R"("Expiration":"2026-01-01T00:00:00Z"})";
  const std::string seeds[] = {
      std::string(1, '\0') + "2026-11-24T07:00:00.123+01:30",
      std::string(1, '\0') + "2030-01-01T00:00:00Z",
      std::string(1, '\1') + json,
      std::string(1, '\1') + R"({"Code":"Failure","Message":"no role"})",
      std::string(1, '\2') + R"({"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","SessionToken":"T",)"
                             R"("Expiration":"2026-01-01T00:00:00-05:00"})",
      std::string(1, '\3') +
          "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S"
          "</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2026-01-01T00:00:00Z</Expiration>"
          "</Credentials></AssumeRoleResult></AssumeRoleResponse>",
      std::string(1, '\4') +
          "<ErrorResponse><Error><Code>AccessDenied</Code><Message>m&#13;</Message></Error>"
          "</ErrorResponse>",
  };
  int i = 0;
  for (const std::string& s : seeds) std::ofstream(dir + "/seed" + std::to_string(i++), std::ios::binary) << s;
}

bool HasControlByte(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) return true;
  }
  return false;
}

void Check(const Result<TimedCredentials>& parsed) {
  if (!parsed.ok()) {
    if (HasControlByte(parsed.status().message())) std::abort();
    return;
  }
  if (!vramflow::s3::CheckCredentials(parsed->credentials, "fuzz").ok()) std::abort();
}

void Time(std::string_view text) {
  Result<std::time_t> t = vramflow::s3::ParseIso8601(text);
  if (!t.ok()) {
    if (HasControlByte(t.status().message())) std::abort();
    return;
  }
  // "YYYY-MM-DDTHH:MM:SSZ" of a year from 1970 on, seconds below 60: read
  // back as written.
  const bool canonical =
      text.size() == 20 && text.back() == 'Z' && text.substr(0, 4) >= "1970" && text.substr(17, 2) < "60";
  if (canonical && vramflow::s3::FormatIso8601(*t) != text) std::abort();
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
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      Time(input);
      break;
    case 1:
      Check(vramflow::s3::ParseCredentialJson(input, "container"));
      break;
    case 2:
      Check(vramflow::s3::ParseCredentialProcessOutput(input, "credential_process"));
      break;
    case 3:
      Check(vramflow::s3::ParseStsReply(200, input, "STS"));
      break;
    default:
      Check(vramflow::s3::ParseStsReply(403, input, "STS"));
      break;
  }
  return 0;
}
