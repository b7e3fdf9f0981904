// SPDX-License-Identifier: MIT
// Signals and S3 multipart uploads, against a real Ceph RGW (S3Rgw.*, see
// s3_rgw_fixture.h): an interrupted `pack -o s3://` aborts its upload
// before it exits 143; a SIGKILLed one leaves its upload journaled, and
// `vramflow s3 cleanup`, or the next upload, aborts it (the uploads are
// listed with ListMultipartUploads, and with the aws CLI where it is there).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/cli_child.h"
#include "tests/support/s3_rgw_fixture.h"
#include "tests/support/shell.h"
#include "transport/aws/xml.h"
#include "transport/s3/s3_client.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ChildStdin;
using testing::CliChild;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A fresh directory (inputs, logs, and the upload journal as
// $XDG_STATE_HOME), removed with its contents.
class Work {
 public:
  Work() {
    char tmpl[] = "/tmp/vf-s3sig-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  ~Work() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string Journal() const { return dir_ + "/state/vramflow/s3-uploads"; }
  std::vector<std::string> Env() const { return {"XDG_STATE_HOME=" + dir_ + "/state"}; }
  // Journal records (*.upload).
  size_t Records() const {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(Journal(), ec)) n += e.path().extension() == ".upload";
    return n;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Ids of the multipart uploads open under `prefix` (ListMultipartUploads).
Result<std::vector<std::string>> ListUploads(s3::Client& client, const std::string& prefix) {
  s3::Request list;
  list.method = "GET";
  list.query = {{"uploads", ""}, {"prefix", prefix}};
  list.what = "ListMultipartUploads";
  VF_ASSIGN_OR_RETURN(s3::Response reply, client.Send(list));
  return s3::XmlFields(reply.body, "UploadId");
}

// One test's view of the bucket: its client, key prefix and URIs.
struct Bucket {
  std::shared_ptr<s3::Client> client;
  std::string bucket, prefix;
  std::string Uri(const std::string& name) const { return "s3://" + bucket + "/" + prefix + name; }
};

// Starts `pack -o s3://.../NAME` reading a pipe, and feeds it until RGW
// holds two parts of its upload. The pack then waits for more input.
void StartUpload(const Bucket& b, const Work& w, const std::string& name, std::unique_ptr<CliChild>* pack,
                 ChildStdin* input) {
  std::string noise;
  if (!fs::exists(w.File("noise"))) {
    CliChild gen(VRAMFLOW_BINARY, {"gen", "-k", "random", "-s", "24M", "-o", w.File("noise")}, w.File("gen.log"));
    ASSERT_EQ(gen.Wait(60000ms), 0) << gen.Log();
  }
  {
    std::ifstream in(w.File("noise"), std::ios::binary);
    noise.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  *pack = std::make_unique<CliChild>(
      VRAMFLOW_BINARY,
      std::vector<std::string>{"pack", "-", "--name", "x", "-c", "raw", "-q", "--max-memory", "64M", "-o", b.Uri(name)},
      w.File("pack.log"), input->read_end, w.Env());
  input->CloseRead();
  const std::string key = b.prefix + name;
  size_t parts = 0, offset = 0;
  for (int i = 0; i < 400 && parts < 2; ++i) {
    input->Feed(noise, &offset);
    auto uploads = ListUploads(*b.client, key);
    ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
    if (!uploads->empty()) {
      s3::Request list_parts;
      list_parts.method = "GET";
      list_parts.key = key;
      list_parts.query = {{"uploadId", (*uploads)[0]}};
      list_parts.what = "ListParts";
      auto listed = b.client->Send(list_parts);
      ASSERT_TRUE(listed.ok()) << listed.status().ToString();
      parts = s3::XmlFields(listed->body, "PartNumber").size();
    }
    if (parts < 2) std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(parts, 2u) << "the packer never stored two parts: " << (*pack)->Log();
  ASSERT_EQ(w.Records(), 1u) << "the upload in progress is journaled";
}

// No upload open under the test's prefix, as RGW and (where it is
// installed) the aws CLI list them.
void ExpectNoOpenUpload(const Bucket& b) {
  auto uploads = ListUploads(*b.client, b.prefix);
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << (*uploads)[0];
  if (::access("/usr/bin/aws", X_OK) == 0) {
    testing::CommandResult listed =
        testing::RunShell("/usr/bin/aws --endpoint-url \"$AWS_ENDPOINT_URL\" s3api list-multipart-uploads --bucket " +
                          testing::ShellQuote(b.bucket) + " --prefix " + testing::ShellQuote(b.prefix));
    EXPECT_EQ(listed.code, 0) << listed.output;
    EXPECT_FALSE(Contains(listed.output, "UploadId")) << listed.output;
  }
}

TEST_F(S3Rgw, SignalsInterruptedPackAbortsItsUpload) {
  Work w;
  const Bucket b{Client(), bucket_, prefix_};
  for (int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(signal));
    std::unique_ptr<CliChild> pack;
    ChildStdin input;
    ASSERT_NO_FATAL_FAILURE(StartUpload(b, w, "interrupted.vfs", &pack, &input));
    pack->Kill(signal);
    EXPECT_EQ(pack->Wait(15000ms), 128 + signal) << pack->Log();
    EXPECT_EQ(pack->killed_by(), 0);
    ExpectNoOpenUpload(b);
    EXPECT_EQ(w.Records(), 0u) << "the record of an aborted upload stays";
  }
}

TEST_F(S3Rgw, SignalsKilledPacksUploadIsAbortedByS3Cleanup) {
  Work w;
  const Bucket b{Client(), bucket_, prefix_};
  std::unique_ptr<CliChild> pack;
  ChildStdin input;
  ASSERT_NO_FATAL_FAILURE(StartUpload(b, w, "killed.vfs", &pack, &input));
  pack->Kill(SIGKILL);
  EXPECT_EQ(pack->Wait(15000ms), 128 + SIGKILL);
  auto open = ListUploads(*b.client, prefix_);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->size(), 1u) << "SIGKILL: nothing could abort it";
  ASSERT_EQ(w.Records(), 1u);

  CliChild cleanup(VRAMFLOW_BINARY, {"s3", "cleanup"}, w.File("cleanup.log"), -1, w.Env());
  EXPECT_EQ(cleanup.Wait(30000ms), 0) << cleanup.Log();
  EXPECT_TRUE(Contains(cleanup.Log(), "aborted 1 upload(s)")) << cleanup.Log();
  ExpectNoOpenUpload(b);
  EXPECT_EQ(w.Records(), 0u);
}

// The next upload (any key) aborts what a killed one left, before its own.
TEST_F(S3Rgw, SignalsNextUploadAbortsAKilledPacksUpload) {
  Work w;
  const Bucket b{Client(), bucket_, prefix_};
  std::unique_ptr<CliChild> pack;
  ChildStdin input;
  ASSERT_NO_FATAL_FAILURE(StartUpload(b, w, "killed.vfs", &pack, &input));
  pack->Kill(SIGKILL);
  EXPECT_EQ(pack->Wait(15000ms), 128 + SIGKILL);
  CliChild next(VRAMFLOW_BINARY, {"pack", "-q", "-c", "raw", w.File("noise"), "-o", b.Uri("next.vfs")},
                w.File("next.log"), -1, w.Env());
  EXPECT_EQ(next.Wait(60000ms), 0) << next.Log();
  ExpectNoOpenUpload(b);
  EXPECT_EQ(w.Records(), 0u);
}

}  // namespace
}  // namespace vramflow
