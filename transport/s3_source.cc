#include "transport/s3_source.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <future>

#include "transport/s3_part_plan.h"

namespace vramflow {
namespace {

using s3::Client;
using s3::Request;
using s3::Response;

// One object: its size and ETag, and ranged GETs of it. Thread-safe.
class S3Object final : public RandomAccessSource {
 public:
  S3Object(std::shared_ptr<Client> client, std::string key, uint64_t size, std::string etag)
      : client_(std::move(client)), key_(std::move(key)), size_(size), etag_(std::move(etag)) {}

  static Result<std::unique_ptr<S3Object>> Open(std::shared_ptr<Client> client, const std::string& key) {
    Request head;
    head.method = "HEAD";
    head.key = key;
    head.what = "HeadObject";
    VF_ASSIGN_OR_RETURN(Response response, client->Send(head));
    std::string length = response.Header("content-length");
    char* end = nullptr;
    uint64_t size = std::strtoull(length.c_str(), &end, 10);
    if (length.empty() || *end != '\0')
      return Status::IoError(client->Uri(key) + ": HEAD reply has no valid Content-Length ('" + length + "')");
    return std::make_unique<S3Object>(std::move(client), key, size, response.Header("etag"));
  }

  uint64_t Size() const override { return size_; }
  std::string Describe() const override { return client_->Uri(key_); }

  // The bytes [offset, offset + size) (size > 0, within the object).
  Result<std::string> Fetch(uint64_t offset, uint64_t size, const std::atomic<bool>* cancel) const {
    std::string range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + size - 1);
    Request r;
    r.method = "GET";
    r.key = key_;
    r.headers = {{"Range", range}};
    if (!etag_.empty()) r.headers.emplace_back("If-Match", etag_);
    r.sign_payload = false;
    r.what = "GetObject " + range;
    VF_ASSIGN_OR_RETURN(Response response, client_->Send(r, cancel));
    if (response.body.size() != size)
      return Status::IoError(Describe() + ": GetObject " + range + ": got " + std::to_string(response.body.size()) +
                             " bytes (HTTP " + std::to_string(response.status) + ")");
    return std::move(response.body);
  }

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override {
    if (offset >= size_ || data.empty()) return size_t{0};
    uint64_t n = std::min<uint64_t>(data.size(), size_ - offset);
    VF_ASSIGN_OR_RETURN(std::string bytes, Fetch(offset, n, nullptr));
    std::memcpy(data.data(), bytes.data(), bytes.size());
    return static_cast<size_t>(n);
  }

 private:
  std::shared_ptr<Client> client_;
  std::string key_;
  uint64_t size_;
  std::string etag_;
};

class S3Source final : public ByteSource {
 public:
  S3Source(std::unique_ptr<S3Object> object, const S3Options& options)
      : object_(std::move(object)), range_size_(std::max<uint64_t>(1, options.range_size)) {
    // The range being read counts against the budget too.
    uint64_t ranges = options.memory_budget / range_size_;
    ahead_ = static_cast<size_t>(std::clamp<uint64_t>(ranges > 1 ? ranges - 1 : 1, 1, s3::Concurrency(options)));
  }

  ~S3Source() override {
    cancel_ = true;
    for (Pending& p : pending_) (void)p.bytes.wait();  // cancelled; the outcome no longer matters
  }

  Result<size_t> Read(std::span<uint8_t> data) override {
    if (!failed_.ok()) return failed_;
    while (current_pos_ == current_.size()) {
      Launch();
      if (pending_.empty()) return size_t{0};  // end of object
      Result<std::string> bytes = pending_.front().bytes.get();
      pending_.pop_front();
      if (!bytes.ok()) {
        failed_ = bytes.status();
        return failed_;
      }
      current_ = std::move(*bytes);
      current_pos_ = 0;
    }
    Launch();
    size_t n = std::min(data.size(), current_.size() - current_pos_);
    std::memcpy(data.data(), current_.data() + current_pos_, n);
    current_pos_ += n;
    return n;
  }

  std::string Describe() const override { return object_->Describe(); }

 private:
  struct Pending {
    std::future<Result<std::string>> bytes;
  };

  // Keeps `ahead_` ranges requested beyond the one being read.
  void Launch() {
    while (pending_.size() < ahead_ && next_offset_ < object_->Size()) {
      uint64_t offset = next_offset_;
      uint64_t size = std::min(range_size_, object_->Size() - offset);
      next_offset_ += size;
      pending_.push_back(Pending{std::async(std::launch::async, [object = object_.get(), offset, size,
                                                                 cancel = &cancel_] {
        return object->Fetch(offset, size, cancel);
      })});
    }
  }

  std::unique_ptr<S3Object> object_;
  uint64_t range_size_;
  size_t ahead_;
  std::atomic<bool> cancel_{false};
  std::deque<Pending> pending_;
  uint64_t next_offset_ = 0;
  std::string current_;
  size_t current_pos_ = 0;
  Status failed_;
};

}  // namespace

Result<std::unique_ptr<ByteSource>> NewS3Source(std::shared_ptr<Client> client, const std::string& key,
                                                const S3Options& options) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<S3Object> object, S3Object::Open(std::move(client), key));
  return std::unique_ptr<ByteSource>(new S3Source(std::move(object), options));
}

Result<std::unique_ptr<RandomAccessSource>> NewS3RandomAccess(std::shared_ptr<Client> client,
                                                              const std::string& key) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<S3Object> object, S3Object::Open(std::move(client), key));
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
  return NewS3RandomAccess(std::make_shared<Client>(std::move(config), options, bucket), key);
}

}  // namespace vramflow
