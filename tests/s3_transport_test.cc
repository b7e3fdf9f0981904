// SPDX-License-Identifier: MIT
// The s3:// sink and source against FakeS3 (tests/support/s3_fake_server.h):
// multipart round trips, retries, aborts, growing parts, ranged reads.
// Limits and timeouts are shrunk so every test runs in well under a second
// or two.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support/s3_fake_server.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_part_plan.h"
#include "transport/s3/s3_sink.h"
#include "transport/s3/s3_source.h"

namespace vramflow {
namespace {

using testing::FakeS3;
using Fault = FakeS3::Fault;

std::vector<uint8_t> RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string AsString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

class S3Fake : public ::testing::Test {
 protected:
  S3Fake() {
    options_.endpoint = server_.endpoint();
    options_.getenv = [](const char* name) -> const char* {
      static const std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", "AK"},
                                                             {"AWS_SECRET_ACCESS_KEY", "SK"}};
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    options_.limits = S3Limits{1024, 1 << 20, 10000};
    options_.part_size = 64 << 10;
    options_.memory_budget = 5 * (64 << 10);
    options_.concurrency = 4;
    options_.retries = 3;
    options_.backoff_base = std::chrono::milliseconds(1);
    options_.backoff_max = std::chrono::milliseconds(10);
    options_.stall_timeout = std::chrono::milliseconds(300);
    options_.range_size = 10000;
  }

  std::shared_ptr<s3::Client> Client() {
    auto config = s3::LoadConfig(options_);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return std::make_shared<s3::Client>(*config, options_, "bkt");
  }

  // Writes `data` in uneven pieces and commits.
  Status Upload(const std::string& key, const std::vector<uint8_t>& data) {
    std::unique_ptr<ByteSink> sink = NewS3Sink(Client(), key, options_);
    size_t pos = 0, step = 777;
    while (pos < data.size()) {
      size_t n = std::min(step, data.size() - pos);
      VF_RETURN_IF_ERROR(sink->Write(std::span(data).subspan(pos, n)));
      pos += n;
      step = step * 3 % 40000 + 1;
    }
    return sink->Commit();
  }

  Result<std::vector<uint8_t>> Download(const std::string& key) {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, NewS3Source(Client(), key, options_));
    std::vector<uint8_t> out;
    std::vector<uint8_t> buf(4093);
    for (;;) {
      VF_ASSIGN_OR_RETURN(size_t n, source->Read(buf));
      if (n == 0) return out;
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
    }
  }

  FakeS3 server_;
  S3Options options_;
};

//! Multipart upload with parts in parallel, then parallel ranged GETs
//! give back the exact bytes.
TEST_F(S3Fake, MultipartRoundTrip) {
  auto data = RandomBytes((1 << 20) + 12345, 1);
  ASSERT_TRUE(Upload("dir/obj", data).ok());
  EXPECT_EQ(server_.Object("bkt/dir/obj").value_or(""), AsString(data));
  EXPECT_EQ(server_.Count("CreateMultipartUpload"), 1);
  EXPECT_EQ(server_.Count("UploadPart"), 17);
  EXPECT_EQ(server_.LastPartSizes().size(), 17u);
  EXPECT_EQ(server_.LastPartSizes().front(), 64u << 10);
  EXPECT_EQ(server_.LastPartSizes().back(), 12345u);
  EXPECT_LE(server_.MaxConcurrent(), 4);
  auto back = Download("dir/obj");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == data);
}

//! Streams within one part go up as a single PUT, empty ones too.
TEST_F(S3Fake, SmallAndEmptyStreamsUseOnePut) {
  auto data = RandomBytes(1000, 2);
  ASSERT_TRUE(Upload("small", data).ok());
  ASSERT_TRUE(Upload("empty", {}).ok());
  EXPECT_EQ(server_.Count("PutObject"), 2);
  EXPECT_EQ(server_.Count("CreateMultipartUpload"), 0);
  EXPECT_EQ(server_.Object("bkt/small").value_or("?"), AsString(data));
  EXPECT_EQ(server_.Object("bkt/empty").value_or("?"), "");
  auto empty = Download("empty");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
}

//! 500s, a 503 SlowDown and a dropped connection are retried.
TEST_F(S3Fake, RetriesThenSucceeds) {
  server_.Arm("UploadPart", Fault::kInternalError500, 2);
  server_.Arm("UploadPart", Fault::kSlowDown503, 1);
  server_.Arm("CreateMultipartUpload", Fault::kCloseConnection, 1);
  server_.Arm("CompleteMultipartUpload", Fault::kSlowDown503, 1);
  auto data = RandomBytes(300 << 10, 3);
  Status s = Upload("retried", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Object("bkt/retried").value_or(""), AsString(data));
  EXPECT_EQ(server_.Count("UploadPart"), 5 + 3);
  EXPECT_EQ(server_.Count("CreateMultipartUpload"), 2);
  EXPECT_EQ(server_.Count("CompleteMultipartUpload"), 2);
}

//! A request that stalls past the stall timeout is abandoned and retried.
TEST_F(S3Fake, StalledRequestTimesOutAndIsRetried) {
  server_.Arm("UploadPart", Fault::kStall, 1);
  auto start = std::chrono::steady_clock::now();
  auto data = RandomBytes(200 << 10, 4);
  Status s = Upload("stalled", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Object("bkt/stalled").value_or(""), AsString(data));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

//! Too many failures: a clear error naming the part and the last status,
//! the upload is aborted, and no object exists.
TEST_F(S3Fake, GivesUpAbortsAndLeavesNothing) {
  server_.Arm("UploadPart", Fault::kSlowDown503, 1000);
  Status s = Upload("doomed", RandomBytes(300 << 10, 5));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("s3://bkt/doomed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("UploadPart "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("gave up after 4 attempts"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HTTP 503 SlowDown"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
  EXPECT_EQ(server_.Count("AbortMultipartUpload"), 1);
  EXPECT_EQ(server_.OpenUploads(), 0u);
  EXPECT_FALSE(server_.Object("bkt/doomed").has_value());
}

//! A failed Complete aborts too.
TEST_F(S3Fake, FailedCompleteAborts) {
  server_.Arm("CompleteMultipartUpload", Fault::kInternalError500, 1000);
  Status s = Upload("nocomplete", RandomBytes(200 << 10, 6));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CompleteMultipartUpload"), std::string::npos) << s.message();
  EXPECT_EQ(server_.OpenUploads(), 0u);
  EXPECT_FALSE(server_.Object("bkt/nocomplete").has_value());
}

//! Ceph RGW 16 answers Complete with <ETag></ETag>: HEAD confirms the size.
TEST_F(S3Fake, EmptyCompleteETagIsConfirmedWithHead) {
  server_.SetEmptyCompleteETag(true);
  auto data = RandomBytes(200 << 10, 7);
  Status s = Upload("rgw", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Count("HeadObject"), 1);
  EXPECT_EQ(server_.Object("bkt/rgw").value_or(""), AsString(data));
}

//! A Complete carried out whose reply is lost is retried; where the store
//! answers the retry with an error (MinIO: 404 NoSuchUpload; any store: a
//! 500 on every retry), HEAD finds the object whole (size and multipart
//! ETag), the upload counts as done and its journal record goes. AWS (and
//! Ceph RGW 16) answer the retry as the first Complete: no HEAD needed.
TEST_F(S3Fake, CompleteWhoseReplyWasLostIsConfirmedWithHead) {
  const std::filesystem::path journal = std::filesystem::path(::testing::TempDir()) / "s3-lost-complete-journal";
  std::filesystem::remove_all(journal);
  options_.journal_dir = journal.string();
  using Repeated = FakeS3::RepeatedComplete;
  int heads = 0;
  for (Repeated repeated : {Repeated::kNoSuchUpload404, Repeated::kInternalError500, Repeated::kSameAnswer}) {
    SCOPED_TRACE(static_cast<int>(repeated));
    server_.SetRepeatedComplete(repeated);
    server_.Arm("CompleteMultipartUpload", Fault::kLoseReply, 1);
    const std::string key = "lost-" + std::to_string(static_cast<int>(repeated));
    auto data = RandomBytes(300 << 10, 11);
    Status s = Upload(key, data);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(server_.Object("bkt/" + key).value_or(""), AsString(data));
    EXPECT_EQ(server_.OpenUploads(), 0u);
    EXPECT_TRUE(std::filesystem::is_empty(journal)) << "the journal keeps the completed upload";
    if (repeated != Repeated::kSameAnswer) ++heads;
    EXPECT_EQ(server_.Count("HeadObject"), heads);
  }
  EXPECT_EQ(server_.Count("AbortMultipartUpload"), 2);  // both answered 404: nothing to abort
  std::filesystem::remove_all(journal);
}

//! After a failed Complete, an object that is not the stream (another
//! writer's, or an older one under --force) leaves the failure standing and
//! the upload aborted; an identical one makes it done, and the upload that
//! did not complete is aborted all the same.
TEST_F(S3Fake, FailedCompleteStandsUnlessTheObjectIsTheStream) {
  auto data = RandomBytes(200 << 10, 12);
  server_.PutObject("bkt/other", "an older object under the same key");
  const int attempts = static_cast<int>(options_.retries) + 1;  // every attempt of one Complete
  server_.Arm("CompleteMultipartUpload", Fault::kInternalError500, attempts);
  Status s = Upload("other", data);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CompleteMultipartUpload"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(multipart upload aborted)"), std::string::npos) << s.message();
  EXPECT_EQ(server_.Object("bkt/other").value_or(""), "an older object under the same key");
  EXPECT_EQ(server_.OpenUploads(), 0u);
  EXPECT_EQ(server_.Count("HeadObject"), 1);

  // The same bytes in the same parts, uploaded before: the key holds the stream.
  ASSERT_TRUE(Upload("same", data).ok());
  server_.Arm("CompleteMultipartUpload", Fault::kInternalError500, attempts);
  s = Upload("same", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Object("bkt/same").value_or(""), AsString(data));
  EXPECT_EQ(server_.OpenUploads(), 0u);
}

//! Under SSE-KMS no client can derive a completed object's ETag from its
//! parts'. A Complete whose reply was lost is still confirmed by HEAD: the
//! object carries this upload's token (its user metadata). An identical
//! object uploaded before carries another token: a failed Complete stands.
TEST_F(S3Fake, LostCompleteUnderSseKmsIsConfirmedByTheUploadsToken) {
  server_.SetOpaqueETags(true);
  server_.SetRepeatedComplete(FakeS3::RepeatedComplete::kNoSuchUpload404);
  server_.Arm("CompleteMultipartUpload", Fault::kLoseReply, 1);
  auto data = RandomBytes(300 << 10, 13);
  Status s = Upload("kms", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Object("bkt/kms").value_or(""), AsString(data));
  EXPECT_EQ(server_.Count("HeadObject"), 1);
  EXPECT_EQ(server_.OpenUploads(), 0u);

  const int attempts = static_cast<int>(options_.retries) + 1;  // every attempt of one Complete
  server_.Arm("CompleteMultipartUpload", Fault::kInternalError500, attempts);
  s = Upload("kms", data);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CompleteMultipartUpload"), std::string::npos) << s.message();
  EXPECT_EQ(server_.Count("HeadObject"), 2);
  EXPECT_EQ(server_.OpenUploads(), 0u);
}

//! SSE-C against S3's documented answers (FakeS3 answers as AWS does):
//! every request on the object carries the key, or S3 would refuse it; it
//! reads back only with the key, and the errors without it, or with
//! another (AWS: 403), say what to check; a sink that may not overwrite
//! refuses an SSE-C object under any key, and a plain object under SSE-C.
TEST_F(S3Fake, SseCObjectsAreReadOnlyWithTheirKeyAsAwsAnswers) {
  auto key = [](char fill) { return std::string(32, fill); };
  auto data = RandomBytes(300 << 10, 21);  // multipart
  auto small = RandomBytes(10 << 10, 22);  // one PutObject
  options_.encryption.customer_key = key('a');
  ASSERT_TRUE(Upload("ssec", data).ok());
  ASSERT_TRUE(Upload("ssec-small", small).ok());
  EXPECT_GT(server_.Count("UploadPart"), 1);
  for (const auto& [name, bytes] : {std::pair{"ssec", &data}, {"ssec-small", &small}}) {
    Result<std::vector<uint8_t>> back = Download(name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, *bytes);
  }

  options_.encryption.customer_key = key('b');
  Result<std::vector<uint8_t>> other = Download("ssec");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Status::Code::kUnauthenticated) << other.status().ToString();
  EXPECT_NE(other.status().message().find("or the object's SSE-C key is not --sse-c-key's"), std::string::npos)
      << other.status().ToString();
  options_.encryption.customer_key.clear();
  Result<std::vector<uint8_t>> keyless = Download("ssec");
  ASSERT_FALSE(keyless.ok());
  EXPECT_NE(keyless.status().message().find("HTTP 400 (bad request: S3 describes an object encrypted with SSE-C "
                                            "only with its key, --sse-c-key)"),
            std::string::npos)
      << keyless.status().ToString();

  options_.overwrite = false;
  auto refused = [&](const std::string& name) {
    Result<std::unique_ptr<ByteSink>> sink = OpenS3Sink("bkt", name, options_);
    return sink.ok() ? Status::Ok() : sink.status();
  };
  Status s = refused("ssec");
  EXPECT_EQ(s.message(),
            "s3://bkt/ssec exists, encrypted with SSE-C (read with --sse-c-key) (use --force to "
            "overwrite)");
  options_.encryption.customer_key = key('b');
  s = refused("ssec");
  EXPECT_EQ(s.message(), "s3://bkt/ssec exists, encrypted with another SSE-C key (use --force to overwrite)");
  server_.PutObject("bkt/plain", "plain bytes");
  s = refused("plain");
  EXPECT_EQ(s.message(), "s3://bkt/plain exists, not encrypted with SSE-C (use --force to overwrite)");
  EXPECT_TRUE(refused("absent").ok());
  EXPECT_EQ(server_.Object("bkt/ssec").value_or(""), AsString(data));
}

//! A sink destroyed without Commit() aborts its upload.
TEST_F(S3Fake, UncommittedSinkAborts) {
  {
    std::unique_ptr<ByteSink> sink = NewS3Sink(Client(), "killed", options_);
    auto data = RandomBytes(300 << 10, 8);
    ASSERT_TRUE(sink->Write(data).ok());
    EXPECT_EQ(server_.Count("CreateMultipartUpload"), 1);  // parts are on their way
  }
  EXPECT_EQ(server_.Count("AbortMultipartUpload"), 1);
  EXPECT_EQ(server_.OpenUploads(), 0u);
  EXPECT_FALSE(server_.Object("bkt/killed").has_value());
}

//! With a tiny simulated limit (8 parts of >= 1 KiB) a stream far longer
//! than 8 x 1 KiB fits because parts double; past the plan it fails.
TEST_F(S3Fake, PartsGrowUnderSimulatedLimits) {
  options_.limits = S3Limits{1024, 1 << 20, 8};
  options_.part_size = 1024;
  auto data = RandomBytes(100 << 10, 9);
  Status s = Upload("grown", data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_.Object("bkt/grown").value_or(""), AsString(data));
  std::vector<size_t> sizes = server_.LastPartSizes();
  ASSERT_EQ(sizes.size(), 7u);  // 1+2+...+64 KiB = 127 KiB >= 100 KiB
  s3::PartPlan plan(1024, options_.limits);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], plan.PartSize(static_cast<uint32_t>(i + 1)));

  s = Upload("toolong", RandomBytes(plan.Capacity(8) + 1, 10));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds S3's 8 parts"), std::string::npos) << s.message();
  EXPECT_EQ(server_.OpenUploads(), 0u);
}

//! Parallel ranged reads and ReadAt return the exact bytes; a failed GET
//! is retried.
TEST_F(S3Fake, RangedReads) {
  auto data = RandomBytes(654321, 11);
  server_.PutObject("bkt/blob", AsString(data));
  server_.Arm("GetObject", Fault::kInternalError500, 2);
  auto back = Download("blob");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == data);
  EXPECT_EQ(server_.Count("GetObject"), 66 + 2);

  auto object = NewS3RandomAccess(Client(), "blob", 8);
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  EXPECT_EQ((*object)->Size(), data.size());
  std::vector<uint8_t> buf(5000);
  for (uint64_t offset : {uint64_t{0}, uint64_t{123457}, uint64_t{654321 - 5000}}) {
    auto n = (*object)->ReadAt(offset, buf);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, 5000u);
    EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin() + static_cast<ptrdiff_t>(offset)));
  }
  auto tail = (*object)->ReadAt(654321 - 10, buf);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, 10u);
  EXPECT_EQ((*object)->ReadAt(654321, buf).value(), 0u);
}

//! Errors name the object (and the range for reads).
TEST_F(S3Fake, ErrorsNameObjectAndRange) {
  auto missing = NewS3Source(Client(), "nope", options_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("s3://bkt/nope"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("HTTP 404"), std::string::npos) << missing.status().message();

  server_.PutObject("bkt/flaky", std::string(50000, 'x'));
  auto source = NewS3Source(Client(), "flaky", options_);
  ASSERT_TRUE(source.ok());
  server_.Arm("GetObject", Fault::kInternalError500, 1000);
  std::vector<uint8_t> buf(100000);
  Result<size_t> n = size_t{0};
  for (int i = 0; i < 10 && n.ok(); ++i) n = (*source)->Read(buf);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("s3://bkt/flaky: GetObject bytes="), std::string::npos) << n.status().message();
  EXPECT_NE(n.status().message().find("HTTP 500 InternalError"), std::string::npos) << n.status().message();
}

}  // namespace
}  // namespace vramflow
