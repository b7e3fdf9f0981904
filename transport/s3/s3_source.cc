// SPDX-License-Identifier: MIT
#include "transport/s3/s3_source.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/printable.h"
#include "transport/core/range_reader.h"
#include "transport/s3/s3_encryption.h"
#include "transport/s3/s3_part_plan.h"

namespace vramflow {
namespace {

using s3::Client;
using s3::Request;
using s3::Response;

// One object: its size and ETag, and ranged GETs of it. Thread-safe.
class S3Object final : public RandomAccessSource {
 public:
  S3Object(std::shared_ptr<Client> client, std::string key, uint64_t size, std::string etag, unsigned concurrent_reads)
      : client_(std::move(client)),
        key_(std::move(key)),
        size_(size),
        etag_(std::move(etag)),
        concurrent_reads_(concurrent_reads) {}

  static Result<std::unique_ptr<S3Object>> Open(std::shared_ptr<Client> client, const std::string& key,
                                                unsigned concurrent_reads) {
    Request head;
    head.method = "HEAD";
    head.key = key;
    s3::AddCustomerKeyHeaders(client->encryption(), &head.headers);
    head.what = "HeadObject";
    VF_ASSIGN_OR_RETURN(Response response, client->Send(head));
    std::string length = response.Header("content-length");
    char* end = nullptr;
    uint64_t size = std::strtoull(length.c_str(), &end, 10);
    if (length.empty() || *end != '\0')
      return Status::IoError(client->Uri(key) + ": HEAD reply has no valid Content-Length (" + Printable(length, 64) +
                             ")");
    return std::make_unique<S3Object>(std::move(client), key, size, response.Header("etag"), concurrent_reads);
  }

  uint64_t Size() const override { return size_; }
  std::string Describe() const override { return client_->Uri(key_); }
  unsigned ConcurrentReads() const override { return concurrent_reads_; }

  // The bytes [offset, offset + size) (size > 0, within the object).
  Result<std::string> Fetch(uint64_t offset, uint64_t size, const std::atomic<bool>* cancel) const {
    std::string range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + size - 1);
    Request r;
    r.method = "GET";
    r.key = key_;
    r.headers = {{"Range", range}};
    if (!etag_.empty()) r.headers.emplace_back("If-Match", etag_);
    s3::AddCustomerKeyHeaders(client_->encryption(), &r.headers);
    r.sign_payload = false;
    r.what = "GetObject " + range;
    VF_ASSIGN_OR_RETURN(Response response, client_->Send(r, cancel));
    if (response.body.size() != size)
      return Status::IoError(Describe() + ": GetObject " + range + ": got " + std::to_string(response.body.size()) +
                             " bytes (HTTP " + std::to_string(response.status) + ")");
    return std::move(response.body);
  }

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override { return ReadSome(offset, data, nullptr); }
  Result<size_t> ReadAtUnlessCancelled(uint64_t offset, std::span<uint8_t> data,
                                       const std::atomic<bool>& cancel) override {
    return ReadSome(offset, data, &cancel);
  }

 private:
  Result<size_t> ReadSome(uint64_t offset, std::span<uint8_t> data, const std::atomic<bool>* cancel) const {
    if (offset >= size_ || data.empty()) return size_t{0};
    uint64_t n = std::min<uint64_t>(data.size(), size_ - offset);
    VF_ASSIGN_OR_RETURN(std::string bytes, Fetch(offset, n, cancel));
    std::memcpy(data.data(), bytes.data(), bytes.size());
    return static_cast<size_t>(n);
  }

  std::shared_ptr<Client> client_;
  std::string key_;
  uint64_t size_;
  std::string etag_;
  const unsigned concurrent_reads_;
};

// The whole object as a stream: ranged GETs of range_size bytes (of half the
// budget when that is less, so that two overlap), as many in flight as the
// budget and the concurrency allow (range_reader.h).
std::unique_ptr<ByteSource> NewObjectStream(std::shared_ptr<S3Object> object, const S3Options& options) {
  RangeReaderOptions read;
  read.memory_budget = options.memory_budget;
  read.request_size = std::max<uint64_t>(
      1, std::min<uint64_t>(options.range_size, std::max<uint64_t>(options.memory_budget / 2, 1u << 20)));
  read.concurrency = s3::Concurrency(options);
  const uint64_t size = object->Size();
  return NewRangeReader(std::move(object), {ByteRange{0, size}}, read);
}

}  // namespace

Result<std::unique_ptr<ByteSource>> NewS3Source(std::shared_ptr<Client> client, const std::string& key,
                                                const S3Options& options) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<S3Object> object,
                      S3Object::Open(std::move(client), key, s3::Concurrency(options)));
  return NewObjectStream(std::move(object), options);
}

Result<std::unique_ptr<RandomAccessSource>> NewS3RandomAccess(std::shared_ptr<Client> client, const std::string& key,
                                                              unsigned concurrent_reads) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<S3Object> object, S3Object::Open(std::move(client), key, concurrent_reads));
  return std::unique_ptr<RandomAccessSource>(std::move(object));
}

Result<std::unique_ptr<ByteSource>> OpenS3Source(const std::string& bucket, const std::string& key,
                                                 const S3Options& options) {
  VF_ASSIGN_OR_RETURN(s3::Config config, s3::LoadConfig(options));
  return NewS3Source(std::make_shared<Client>(std::move(config), options, bucket), key, options);
}

Result<std::unique_ptr<RandomAccessSource>> OpenS3RandomAccess(const std::string& bucket, const std::string& key,
                                                               const S3Options& options) {
  VF_ASSIGN_OR_RETURN(s3::Config config, s3::LoadConfig(options));
  return NewS3RandomAccess(std::make_shared<Client>(std::move(config), options, bucket), key, s3::Concurrency(options));
}

}  // namespace vramflow
