// SPDX-License-Identifier: MIT
// The multipart upload journal (transport/s3/s3_journal.h): records survive
// any key, malformed ones are reported and kept, live writers' uploads are
// left alone, and a dead writer's is aborted at the fake S3.
#include "transport/s3/s3_journal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/owner_tag.h"
#include "tests/support/s3_fake_server.h"
#include "transport/aws/xml.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_config.h"

namespace vramflow::s3 {
namespace {

namespace fs = std::filesystem;

class JournalDir {
 public:
  JournalDir() {
    char tmpl[] = "/tmp/vf-journal-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  ~JournalDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path() const { return dir_ + "/state/vramflow/s3-uploads"; }

 private:
  std::string dir_;
};

TEST(S3Journal, DefaultDirectoryFollowsXdgStateHome) {
  EXPECT_EQ(DefaultJournalDir([](const char* n) -> const char* {
              return std::string(n) == "XDG_STATE_HOME" ? "/st" : std::string(n) == "HOME" ? "/h" : nullptr;
            }),
            "/st/vramflow/s3-uploads");
  EXPECT_EQ(DefaultJournalDir([](const char* n) -> const char* { return std::string(n) == "HOME" ? "/h" : nullptr; }),
            "/h/.local/state/vramflow/s3-uploads");
  EXPECT_EQ(DefaultJournalDir([](const char*) -> const char* { return nullptr; }), "");
}

TEST(S3Journal, RecordsRoundTripAnyKeyAndMalformedOnesAreReported) {
  JournalDir dir;
  JournaledUpload u;
  u.endpoint = "http://127.0.0.1:9";
  u.addressing = "path";
  u.region = "us-east-1";
  u.bucket = "b";
  u.key = "odd key/with %25 and\nnewline";
  u.upload_id = "id 1";
  ASSERT_TRUE(Journal(dir.path(), &u).ok());
  ASSERT_FALSE(u.file.empty());
  std::ofstream(dir.path() + "/123.456-deadbeef.upload") << "endpoint http://x\nkey\n";
  std::vector<std::string> problems;
  std::vector<JournaledUpload> read = ReadJournal(dir.path(), &problems);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].key, u.key);
  EXPECT_EQ(read[0].upload_id, u.upload_id);
  EXPECT_EQ(read[0].owner, OwnerTag());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("123.456-deadbeef.upload"), std::string::npos) << problems[0];
  Forget(read[0]);
  problems.clear();
  EXPECT_TRUE(ReadJournal(dir.path(), &problems).empty());
}

TEST(S3Journal, AbortsOnlyDeadWritersUploads) {
  testing::FakeS3 fake;
  S3Options options;
  options.endpoint = fake.endpoint();
  options.region = "us-east-1";
  options.getenv = [](const char* n) -> const char* {
    std::string name = n;
    if (name == "AWS_ACCESS_KEY_ID") return "AKIDEXAMPLE";
    if (name == "AWS_SECRET_ACCESS_KEY") return "secret";
    return nullptr;
  };
  auto config = LoadConfig(options);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  Client client(*config, options, "bucket");
  auto create = [&](const std::string& key) {
    Request r;
    r.method = "POST";
    r.key = key;
    r.query = {{"uploads", ""}};
    r.what = "CreateMultipartUpload";
    auto reply = client.Send(r);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? XmlField(reply->body, "UploadId").value_or("") : "";
  };
  JournalDir dir;
  JournaledUpload live{"", "", fake.endpoint(), "path", "us-east-1", "bucket", "live", create("live")};
  JournaledUpload dead{"", "", fake.endpoint(), "path", "us-east-1", "bucket", "dead", create("dead")};
  ASSERT_TRUE(Journal(dir.path(), &live).ok());
  ASSERT_TRUE(Journal(dir.path(), &dead).ok());
  // The second record as a process that has exited would have left it.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status;
  ::waitpid(child, &status, 0);
  const std::string dead_file = dir.path() + "/" + std::to_string(child) + ".1-0.upload";
  std::string text;
  {
    std::ifstream in(dead.file);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  text.replace(text.find("owner " + OwnerTag()), std::string::npos, "owner " + std::to_string(child) + ".1\n");
  std::ofstream(dead_file) << text;
  ::unlink(dead.file.c_str());
  ASSERT_EQ(fake.OpenUploads(), 2u);

  CleanupReport report = AbortJournaledUploads(dir.path(), options, /*include_live=*/false);
  EXPECT_EQ(report.aborted, 1u);
  EXPECT_EQ(report.skipped, 1u);
  EXPECT_TRUE(report.failures.empty()) << report.failures[0];
  EXPECT_EQ(fake.OpenUploads(), 1u);
  EXPECT_FALSE(fs::exists(dead_file));
  EXPECT_TRUE(fs::exists(live.file));

  report = AbortJournaledUploads(dir.path(), options, /*include_live=*/true);
  EXPECT_EQ(report.aborted, 1u);
  EXPECT_EQ(fake.OpenUploads(), 0u);
  EXPECT_FALSE(fs::exists(live.file));
}

}  // namespace
}  // namespace vramflow::s3
