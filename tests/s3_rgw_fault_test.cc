// SPDX-License-Identifier: MIT
// The s3:// sink against a real Ceph RGW through FaultProxy
// (tests/support/s3_fault_proxy.h), which answers chosen UploadPart requests with
// 500 InternalError or 503 SlowDown instead of forwarding them: retried
// parts, a given-up upload that is aborted, and parts that grow when a
// stream outruns max_parts at the minimum part size; and a Complete whose
// reply it loses. Short backoffs keep
// each test to seconds. They skip, saying why, without an RGW (see
// s3_rgw_fixture.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "tests/support/s3_fault_proxy.h"
#include "tests/support/s3_rgw_fixture.h"
#include "transport/open_uri.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_part_plan.h"

namespace vramflow {
namespace {

using testing::FaultProxy;
using Fault = FaultProxy::Fault;
constexpr uint64_t kMiB = 1 << 20;

// Stream byte `pos`, reproducible without keeping the stream (a few 72 MiB
// copies would crowd a shared test machine): byte pos % 8 of
// splitmix64(pos / 8), so no stretch repeats at a part boundary.
uint8_t PatternByte(uint64_t pos) {
  uint64_t z = pos / 8 + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> (8 * (pos % 8)));
}

void FillPattern(uint64_t offset, std::span<uint8_t> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = PatternByte(offset + i);
}

// Uploads `size` pattern bytes to `uri` in 1 MiB writes and commits.
Status Upload(const std::string& uri, uint64_t size, const TransportOptions& options) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(uri, options));
  std::vector<uint8_t> buf(kMiB);
  for (uint64_t pos = 0; pos < size; pos += buf.size()) {
    std::span<uint8_t> piece(buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), size - pos)));
    FillPattern(pos, piece);
    // A failed part may surface here or at Commit(), which returns the first error either way.
    if (!sink->Write(piece).ok()) break;
  }
  return sink->Commit();
}

// Reads `uri` back and compares it with the pattern; "" when equal.
std::string Compare(const std::string& uri, uint64_t size, const TransportOptions& options) {
  auto source = OpenSource(uri, options);
  if (!source.ok()) return source.status().ToString();
  std::vector<uint8_t> got(kMiB), want(kMiB);
  uint64_t pos = 0;
  for (;;) {
    auto n = ReadFully(**source, got);
    if (!n.ok()) return n.status().ToString();
    if (*n == 0) break;
    if (pos + *n > size) return "the object is longer than the " + std::to_string(size) + " bytes written";
    FillPattern(pos, std::span(want.data(), *n));
    if (!std::equal(got.begin(), got.begin() + static_cast<ptrdiff_t>(*n), want.begin()))
      return "the object differs in the MiB at offset " + std::to_string(pos);
    pos += *n;
  }
  return pos == size ? "" : "the object has " + std::to_string(pos) + " bytes, not " + std::to_string(size);
}

// The proxy in front of the RGW, and options that go through it with
// short backoffs (the fixture's options_ still go straight to the RGW).
std::unique_ptr<FaultProxy> StartProxy(const TransportOptions& direct, TransportOptions* proxied) {
  auto proxy = FaultProxy::Start(std::getenv("AWS_ENDPOINT_URL"));
  EXPECT_TRUE(proxy.ok()) << proxy.status().ToString();
  if (!proxy.ok()) return nullptr;
  *proxied = direct;
  proxied->s3.endpoint = (*proxy)->endpoint();
  proxied->s3.backoff_base = std::chrono::milliseconds(10);
  proxied->s3.backoff_max = std::chrono::milliseconds(40);
  return std::move(*proxy);
}

std::vector<FaultProxy::Seen> Matching(const std::vector<FaultProxy::Seen>& log, const FaultProxy::Match& match) {
  std::vector<FaultProxy::Seen> out;
  for (const FaultProxy::Seen& s : log)
    if (match(s)) out.push_back(s);
  return out;
}

std::string Describe(const std::vector<FaultProxy::Seen>& log) {
  std::string out;
  for (const FaultProxy::Seen& s : log)
    out += s.method + " " + s.target.substr(0, 80) + " " + std::to_string(s.body_bytes) + " -> " +
           std::to_string(s.status) + (s.injected ? " (injected)" : "") + "\n";
  return out;
}

//! The proxy keeps signatures valid: a request through it succeeds, and
//! RGW still refuses a bad signature through it.
TEST_F(S3Rgw, FaultProxyPassesSignedRequestsThrough) {
  TransportOptions proxied;
  std::unique_ptr<FaultProxy> proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  ASSERT_TRUE(Upload(Uri("small"), 1000, proxied).ok());
  EXPECT_EQ(Compare(Uri("small"), 1000, proxied), "");
  proxied.s3.getenv = [](const char* name) -> const char* {
    if (std::string(name) == "AWS_SECRET_ACCESS_KEY") return "not-the-secret-key-at-all-000000000000000";
    return std::getenv(name);
  };
  Status s = Upload(Uri("denied"), 1000, proxied);
  EXPECT_NE(s.message().find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << s.message();
}

//! UploadParts that fail a few times with 500 InternalError or 503 SlowDown
//! are retried; the object completes and reads back byte for byte.
TEST_F(S3Rgw, PartsThatFailAFewTimesAreRetried) {
  TransportOptions proxied;
  std::unique_ptr<FaultProxy> proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  proxy->Arm(FaultProxy::UploadPartNumber(2), Fault::kInternalError500, 2);
  proxy->Arm(FaultProxy::UploadPartNumber(3), Fault::kSlowDown503, 1);
  const uint64_t size = 13 * kMiB + 4321;  // parts of 5, 5 and 3 MiB
  Status s = Upload(Uri("retried"), size, proxied);
  const auto log = proxy->Log();
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Describe(log);

  auto part = [&](int n) { return Matching(log, FaultProxy::UploadPartNumber(n)); };
  ASSERT_EQ(part(1).size(), 1u) << Describe(log);
  ASSERT_EQ(part(2).size(), 3u) << Describe(log);
  EXPECT_EQ(part(2)[0].status, 500);
  EXPECT_EQ(part(2)[1].status, 500);
  EXPECT_EQ(part(2)[2].status, 200);
  EXPECT_FALSE(part(2)[2].injected);
  ASSERT_EQ(part(3).size(), 2u) << Describe(log);
  EXPECT_EQ(part(3)[0].status, 503);
  EXPECT_EQ(part(3)[1].status, 200);
  auto completes = Matching(log, [](const FaultProxy::Seen& seen) {
    return seen.method == "POST" && !FaultProxy::QueryValue(seen.target, "uploadId").empty();
  });
  ASSERT_EQ(completes.size(), 1u) << Describe(log);
  EXPECT_EQ(completes[0].status, 200);

  // Read straight from RGW, not through the proxy.
  EXPECT_EQ(Compare(Uri("retried"), size, options_), "");
}

//! Every UploadPart failing: Commit() fails naming the object, the part and
//! the last error; the multipart upload is aborted (none left open) and no
//! object exists.
TEST_F(S3Rgw, EveryUploadPartFailingAbortsTheUpload) {
  TransportOptions proxied;
  std::unique_ptr<FaultProxy> proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  proxied.s3.retries = 2;
  proxy->Arm(FaultProxy::UploadPart(), Fault::kInternalError500, -1);
  const auto started = std::chrono::steady_clock::now();
  Status s = Upload(Uri("given-up"), 12 * kMiB, proxied);
  const auto log = proxy->Log();
  ASSERT_FALSE(s.ok()) << Describe(log);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  const std::vector<std::string> parts_of_the_message = {Uri("given-up") + ": UploadPart ", "gave up after 3 attempts",
                                                         "HTTP 500 InternalError", "(multipart upload aborted)"};
  for (const std::string& part : parts_of_the_message)
    EXPECT_NE(s.message().find(part), std::string::npos) << part << "\n" << s.message();

  for (const FaultProxy::Seen& put : Matching(log, FaultProxy::UploadPart())) {
    EXPECT_TRUE(put.injected) << Describe(log);
  }
  auto aborts = Matching(log, [](const FaultProxy::Seen& seen) {
    return seen.method == "DELETE" && !FaultProxy::QueryValue(seen.target, "uploadId").empty();
  });
  ASSERT_EQ(aborts.size(), 1u) << Describe(log);
  EXPECT_EQ(aborts[0].status, 204) << Describe(log);

  // What RGW holds, asked directly: no open upload, no object.
  auto client = Client();
  auto uploads = OpenUploads(*client, prefix_);
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << (*uploads)[0];
  s3::Request head;
  head.method = "HEAD";
  head.key = prefix_ + "given-up";
  head.what = "HeadObject";
  auto object = client->Send(head);
  ASSERT_FALSE(object.ok()) << "an object exists";
  EXPECT_NE(object.status().message().find("HTTP 404"), std::string::npos) << object.status().ToString();
}

//! A CompleteMultipartUpload that RGW carries out but whose reply is lost.
//! RGW (Ceph 16) answers the client's retry as it answered the first: 200
//! and the ETag. Where the retries fail instead (as MinIO's 404
//! NoSuchUpload; here the proxy answers them with 500s), HEAD finds the
//! object whole, its ETag the one vramflow derives from the parts' ETags,
//! so the upload is done: Commit() succeeds, the upload id is aborted with
//! nothing left to abort (RGW: 404), and the object reads back.
TEST_F(S3Rgw, CompleteWhoseReplyWasLostIsConfirmedWithHead) {
  TransportOptions proxied;
  std::unique_ptr<FaultProxy> proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  proxied.s3.retries = 2;
  const uint64_t size = 11 * kMiB + 7;  // parts of 5, 5 and 1 MiB

  proxy->Arm(FaultProxy::Complete(), Fault::kLoseReply, 1);
  Status s = Upload(Uri("lost-reply"), size, proxied);
  auto log = proxy->Log();
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Describe(log);
  auto completes = Matching(log, FaultProxy::Complete());
  ASSERT_EQ(completes.size(), 2u) << Describe(log);
  EXPECT_TRUE(completes[0].reply_lost);
  EXPECT_EQ(completes[0].status, 200) << Describe(log);
  EXPECT_EQ(completes[1].status, 200) << Describe(log);  // RGW's answer to the retry
  EXPECT_EQ(Compare(Uri("lost-reply"), size, options_), "");

  proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  proxied.s3.retries = 2;
  proxy->Arm(FaultProxy::Complete(), Fault::kLoseReply, 1);
  proxy->Arm(FaultProxy::Complete(), Fault::kInternalError500, -1);  // every retry
  s = Upload(Uri("lost-reply-retries-fail"), size, proxied);
  log = proxy->Log();
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Describe(log);
  completes = Matching(log, FaultProxy::Complete());
  // The retries (libcurl may add one of its own on the connection it found closed).
  ASSERT_GE(completes.size(), 3u) << Describe(log);
  EXPECT_TRUE(completes[0].reply_lost);
  for (size_t i = 1; i < completes.size(); ++i) EXPECT_TRUE(completes[i].injected) << Describe(log);
  auto heads = Matching(log, FaultProxy::Method("HEAD"));
  ASSERT_EQ(heads.size(), 2u) << Describe(log);  // "is there an object?", then the confirmation
  EXPECT_EQ(heads[1].status, 200) << Describe(log);
  auto aborts = Matching(log, FaultProxy::Method("DELETE"));
  ASSERT_EQ(aborts.size(), 1u) << Describe(log);
  EXPECT_EQ(aborts[0].status, 404) << Describe(log);  // NoSuchUpload: it was completed

  auto client = Client();
  auto uploads = OpenUploads(*client, prefix_);
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << (*uploads)[0];
  EXPECT_EQ(Compare(Uri("lost-reply-retries-fail"), size, options_), "");
}

//! A stream far longer than max_parts x the minimum part size (8 x 5 MiB
//! simulated; 72 MiB would take 15 such parts) completes because the parts
//! grow (5, 10, 20, then the last 37 MiB), within a small memory budget,
//! and reads back byte for byte.
TEST_F(S3Rgw, StreamBeyondMaxPartsAtTheMinimumSizeGrowsItsParts) {
  TransportOptions proxied;
  std::unique_ptr<FaultProxy> proxy = StartProxy(options_, &proxied);
  ASSERT_TRUE(proxy);
  proxied.s3.limits = S3Limits{5 * kMiB, 5ull << 30, 8};
  proxied.s3.part_size = 0;              // from the budget: at least the minimum
  proxied.s3.memory_budget = 10 * kMiB;  // one big part in flight at a time
  proxied.s3.concurrency = 2;
  const uint64_t size = 72 * kMiB + 123;
  ASSERT_GT(size, proxied.s3.limits.max_parts * proxied.s3.limits.min_part_size);
  Status s = Upload(Uri("grown"), size, proxied);
  const auto log = proxy->Log();
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Describe(log);

  auto parts = Matching(log, FaultProxy::UploadPart());
  ASSERT_LE(parts.size(), proxied.s3.limits.max_parts) << Describe(log);
  std::vector<uint64_t> sizes(parts.size());
  for (const FaultProxy::Seen& p : parts) {
    const int n = std::stoi(FaultProxy::QueryValue(p.target, "partNumber"));
    ASSERT_TRUE(n >= 1 && static_cast<size_t>(n) <= sizes.size()) << Describe(log);
    sizes[n - 1] = p.body_bytes;
    EXPECT_EQ(p.status, 200);
  }
  const s3::PartPlan plan(s3::FirstPartSize(proxied.s3), proxied.s3.limits);
  ASSERT_EQ(plan.first(), 5 * kMiB);
  uint64_t total = 0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i], plan.PartSize(static_cast<uint32_t>(i + 1))) << "part " << i + 1;
    total += sizes[i];
  }
  total += sizes.back();
  EXPECT_EQ(total, size);
  EXPECT_EQ(sizes.size(), 4u) << Describe(log);  // 5 + 10 + 20 MiB, then the rest of 40
  EXPECT_GT(sizes.back(), sizes.front());

  EXPECT_EQ(Compare(Uri("grown"), size, options_), "");
}

}  // namespace
}  // namespace vramflow
