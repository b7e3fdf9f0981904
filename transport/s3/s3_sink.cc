// SPDX-License-Identifier: MIT
#include "transport/s3/s3_sink.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/printable.h"
#include "transport/aws/sigv4.h"
#include "transport/aws/xml.h"
#include "transport/s3/s3_encryption.h"
#include "transport/s3/s3_journal.h"
#include "transport/s3/s3_part_plan.h"

namespace vramflow {
namespace {

using s3::Client;
using s3::Request;
using s3::Response;

// User metadata set on each multipart upload: a token of 128 random bits
// that only this upload's object carries.
constexpr char kUploadTokenHeader[] = "x-amz-meta-vramflow-upload";

std::string UploadToken() {
  std::random_device random;
  std::string token;
  char word[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
    token += word;
  }
  return token;
}

// A part on its way up: its future yields the part's ETag.
struct InFlight {
  uint32_t number;
  uint64_t size;
  std::future<Result<std::string>> etag;
};

// `s` with `note` appended to its message, same code.
Status WithNote(const Status& s, const std::string& note) {
  std::string m = s.message() + note;
  switch (s.code()) {
    case Status::Code::kTimedOut:
      return Status::TimedOut(m);
    case Status::Code::kCancelled:
      return Status::Cancelled(m);
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(m);
    case Status::Code::kInternal:
      return Status::Internal(m);
    case Status::Code::kUnauthenticated:
      return Status::Unauthenticated(m);
    default:
      return Status::IoError(m);
  }
}

// HeadObject of `key`, with SSE-C's key if `encryption` has one; `answers`:
// statuses besides 2xx that are answers.
Request HeadRequest(const S3Encryption& encryption, const std::string& key, std::string what,
                    std::vector<long> answers = {}) {
  Request r;
  r.method = "HEAD";
  r.key = key;
  s3::AddCustomerKeyHeaders(encryption, &r.headers);
  r.answers = std::move(answers);
  r.what = std::move(what);
  return r;
}

// AbortMultipartUpload of `upload_id` on `key`; 404 (NoSuchUpload) an
// answer when `absent_is_answer`.
Request AbortRequest(const std::string& key, const std::string& upload_id, bool absent_is_answer,
                     std::string what = "AbortMultipartUpload") {
  Request r;
  r.method = "DELETE";
  r.key = key;
  r.query = {{"uploadId", upload_id}};
  if (absent_is_answer) r.answers = {404};
  r.what = std::move(what);
  return r;
}

std::string Range(uint64_t offset, uint64_t size) {
  return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + size - 1);
}

class S3Sink final : public ByteSink {
 public:
  S3Sink(std::shared_ptr<Client> client, std::string key, const S3Options& options)
      : client_(std::move(client)),
        key_(std::move(key)),
        plan_(s3::FirstPartSize(options), options.limits),
        budget_(options.memory_budget),
        concurrency_(s3::Concurrency(options)),
        journal_dir_(options.journal_dir),
        cleanup_(options.cleanup) {}

  ~S3Sink() override {
    interrupt_entry_.Release();  // an interrupt in progress finishes its abort first
    if (committed_) return;
    cancel_ = true;  // stops parts in flight at their next progress tick
    Drain();
    if (!upload_id_.empty()) (void)Abort();  // best effort: nothing else to do in a destructor
  }

  Status Write(std::span<const uint8_t> data) override {
    if (!failed_.ok()) return failed_;
    if (committed_) return Status::Internal(Describe() + ": Write after Commit");
    while (!data.empty()) {
      if (buffer_.capacity() == 0) VF_RETURN_IF_ERROR(Fail(StartBuffer()));
      size_t room = static_cast<size_t>(part_size_ - buffer_.size());
      size_t n = std::min(room, data.size());
      buffer_.insert(buffer_.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(n));
      data = data.subspan(n);
      if (buffer_.size() == part_size_) VF_RETURN_IF_ERROR(Fail(SendPart()));
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (!failed_.ok()) return failed_;
    if (committed_) return Status::Ok();
    if (upload_id_.empty()) {
      VF_RETURN_IF_ERROR(Fail(PutWhole()));
    } else {
      if (!buffer_.empty()) VF_RETURN_IF_ERROR(Fail(SendPart()));
      VF_RETURN_IF_ERROR(Fail(Collect(true)));
      VF_RETURN_IF_ERROR(Fail(Complete()));
    }
    committed_ = true;
    return Status::Ok();
  }

  std::string Describe() const override { return client_->Uri(key_); }
  bool Seekable() const override { return true; }

 private:
  // Records the first error, stops and aborts the upload; returns the error.
  Status Fail(Status status) {
    if (status.ok()) return status;
    cancel_ = true;
    Drain();
    std::string note;
    if (!upload_id_.empty()) {
      Status aborted = Abort();
      note =
          aborted.ok() ? " (multipart upload aborted)" : " (aborting the upload failed too: " + aborted.message() + ")";
      upload_id_.clear();
    }
    failed_ = WithNote(status, note);
    return failed_;
  }

  // Allocates the next part's buffer once the parts in flight leave room
  // for it in the budget (or none is in flight).
  Status StartBuffer() {
    if (next_part_ > plan_.max_parts())
      return Status::IoError(Describe() + ": the stream exceeds S3's " + std::to_string(plan_.max_parts()) +
                             " parts (" + std::to_string(position_) + " bytes so far)");
    part_size_ = plan_.PartSize(next_part_);
    while (!in_flight_.empty() && in_flight_bytes_ + part_size_ > budget_) VF_RETURN_IF_ERROR(CollectOldest());
    buffer_.reserve(static_cast<size_t>(part_size_));
    return Status::Ok();
  }

  Status SendPart() {
    if (upload_id_.empty()) VF_RETURN_IF_ERROR(Create());
    while (in_flight_.size() >= concurrency_) VF_RETURN_IF_ERROR(CollectOldest());
    VF_RETURN_IF_ERROR(Collect(false));  // notice a failed part early
    uint32_t number = next_part_++;
    uint64_t size = buffer_.size();
    std::string what = "UploadPart " + std::to_string(number) + " (" + Range(position_, size) + ")";
    position_ += size;
    in_flight_bytes_ += size;
    in_flight_.push_back(InFlight{number, size,
                                  std::async(std::launch::async,
                                             [client = client_, key = key_, id = upload_id_, number, what,
                                              cancel = &cancel_, data = std::move(buffer_)]() -> Result<std::string> {
                                               Request r;
                                               r.method = "PUT";
                                               r.key = key;
                                               r.query = {{"partNumber", std::to_string(number)}, {"uploadId", id}};
                                               r.headers = {{"Content-MD5", s3::Md5Base64(data)}};
                                               s3::AddCustomerKeyHeaders(client->encryption(), &r.headers);
                                               r.body = data;
                                               r.what = what;
                                               VF_ASSIGN_OR_RETURN(Response response, client->Send(r, cancel));
                                               std::string etag = response.Header("etag");
                                               if (etag.empty())
                                                 return Status::IoError(client->Uri(key) + ": " + what +
                                                                        ": reply has no ETag");
                                               return etag;
                                             })});
    buffer_ = std::vector<uint8_t>();
    return Status::Ok();
  }

  Status CollectOldest() {
    InFlight part = std::move(in_flight_.front());
    in_flight_.pop_front();
    Result<std::string> etag = part.etag.get();
    in_flight_bytes_ -= part.size;
    if (!etag.ok()) return etag.status();
    etags_.resize(std::max<size_t>(etags_.size(), part.number));
    etags_[part.number - 1] = *etag;
    return Status::Ok();
  }

  // Collects every part in flight (`all`), or only those finished at the
  // front of the queue; returns the first part's error.
  Status Collect(bool all) {
    while (!in_flight_.empty()) {
      bool ready = in_flight_.front().etag.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      if (!all && !ready) return Status::Ok();
      VF_RETURN_IF_ERROR(CollectOldest());
    }
    return Status::Ok();
  }

  // Waits for every part in flight, ignoring their outcome (failure path).
  void Drain() {
    for (InFlight& part : in_flight_) (void)part.etag.get();  // outcome already superseded by the first error
    in_flight_.clear();
    in_flight_bytes_ = 0;
  }

  Status Create() {
    // Registered before the request: an interrupt while it is in flight
    // waits for its answer and aborts the upload it created.
    pending_ = std::make_shared<PendingUpload>();
    interrupt_entry_ = CleanupEntry(
        cleanup_, [client = client_, pending = pending_] { AbortWhenCreated(*client, *pending); },
        CleanupRegistry::Kind::kRemote);
    if (!interrupt_entry_.registered()) return InterruptedStatus(Describe());
    Request r;
    r.method = "POST";
    r.key = key_;
    r.query = {{"uploads", ""}};
    // S3 stores it with the completed object, so that HEAD can tell this
    // upload's object from any other (CompletedAfterAll).
    upload_token_ = UploadToken();
    r.headers = {{kUploadTokenHeader, upload_token_}};
    s3::AddCreateHeaders(client_->encryption(), &r.headers);
    r.what = "CreateMultipartUpload";
    Result<Response> response = client_->Send(r, &cancel_);
    std::optional<std::string> id;
    if (response.ok()) id = s3::XmlField(response->body, "UploadId");
    if (id && !id->empty()) upload_id_ = *id;
    if (!upload_id_.empty()) Journal();
    pending_->Answer(upload_id_, journal_);
    VF_RETURN_IF_ERROR(response.status());
    if (upload_id_.empty()) return Status::IoError(Describe() + ": CreateMultipartUpload reply has no UploadId");
    // Before a byte is sent: Fail() aborts the upload.
    VF_RETURN_IF_ERROR(
        s3::CheckApplied(client_->encryption(), *response).WithContext(Describe() + ": CreateMultipartUpload"));
    return Status::Ok();
  }

  // Records the new upload for `vramflow s3 cleanup` after a crash. A
  // journal that cannot be written (a read-only home in a container) does
  // not stop the upload: an interrupt still aborts it, and a bucket
  // lifecycle rule is the safety net for a crash (docs/S3.md).
  void Journal() {
    const s3::Config& config = client_->config();
    journal_ = s3::JournaledUpload{};
    journal_.endpoint = config.scheme + "://" + config.host;
    journal_.addressing = config.path_style ? "path" : "virtual";
    journal_.region = config.region;
    journal_.bucket = client_->bucket();
    journal_.key = key_;
    journal_.upload_id = upload_id_;
    if (!journal_dir_.empty()) (void)s3::Journal(journal_dir_, &journal_);
  }

  // The upload is over (completed or aborted): nothing left to clean up.
  void Untrack() {
    interrupt_entry_.Release();
    s3::Forget(journal_);
    journal_ = s3::JournaledUpload{};
  }

  // What an interrupt needs of an upload being created: its id, once
  // CreateMultipartUpload has answered, and its journal record.
  struct PendingUpload {
    std::mutex mu;
    std::condition_variable cv;
    bool answered = false;
    std::string upload_id;  // "" if the request failed
    s3::JournaledUpload journal;
    void Answer(const std::string& id, const s3::JournaledUpload& record) {
      std::lock_guard lock(mu);
      answered = true;
      upload_id = id;
      journal = record;
      cv.notify_all();
    }
  };

  // The interrupt's undo: aborts the upload (waiting for its creation to be
  // answered if need be), giving up after kInterruptAbortDeadline in all; the
  // journal record goes only once S3 has confirmed.
  static void AbortWhenCreated(Client& client, PendingUpload& pending) {
    const auto deadline = std::chrono::steady_clock::now() + kInterruptAbortDeadline;
    std::string id;
    s3::JournaledUpload journal;
    {
      std::unique_lock lock(pending.mu);
      if (!pending.cv.wait_until(lock, deadline, [&] { return pending.answered; })) return;
      id = pending.upload_id;
      journal = pending.journal;
    }
    if (id.empty()) return;
    std::atomic<bool> give_up{false};
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread timer([&] {
      std::unique_lock lock(mu);
      if (!cv.wait_until(lock, deadline, [&] { return done; })) give_up = true;
    });
    // NoSuchUpload: completed or aborted meanwhile.
    Result<Response> response = client.Send(AbortRequest(journal.key, id, /*absent_is_answer=*/true), &give_up);
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
    timer.join();
    if (response.ok()) s3::Forget(journal);
  }

  Status PutWhole() {
    Request r;
    r.method = "PUT";
    r.key = key_;
    r.headers = {{"Content-MD5", s3::Md5Base64(buffer_)}};
    s3::AddCreateHeaders(client_->encryption(), &r.headers);
    r.body = buffer_;
    r.what = "PutObject (" + std::to_string(buffer_.size()) + " bytes)";
    VF_ASSIGN_OR_RETURN(Response reply, client_->Send(r, &cancel_));
    if (Status applied = s3::CheckApplied(client_->encryption(), reply); !applied.ok()) {
      // Stored, but not as asked: it goes.
      Request remove;
      remove.method = "DELETE";
      remove.key = key_;
      remove.what = "DeleteObject (stored without the server-side encryption asked for)";
      const Status removed = client_->Send(remove).status();
      return WithNote(applied.WithContext(Describe() + ": PutObject"),
                      removed.ok() ? " (the object was deleted)" : " (deleting it failed: " + removed.message() + ")");
    }
    position_ = buffer_.size();
    buffer_ = std::vector<uint8_t>();
    return Status::Ok();
  }

  // Completes the upload and forgets its journal record.
  Status Complete() {
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i)
      body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + s3::XmlEscape(etags_[i]) +
              "</ETag></Part>";
    body += "</CompleteMultipartUpload>";
    Request r;
    r.method = "POST";
    r.key = key_;
    r.query = {{"uploadId", upload_id_}};
    r.body = std::span(reinterpret_cast<const uint8_t*>(body.data()), body.size());
    s3::AddCustomerKeyHeaders(client_->encryption(), &r.headers);
    r.error_in_ok_body = true;
    r.what = "CompleteMultipartUpload (" + std::to_string(etags_.size()) + " parts)";
    Result<Response> response = client_->Send(r, &cancel_);
    if (!response.ok()) return CompletedAfterAll(response.status());
    std::string etag = s3::XmlField(response->body, "ETag").value_or("");
    if (etag.empty()) {
      // Ceph RGW 16 answers the first Complete with <ETag></ETag>: confirm
      // that the object is there, whole, before calling it committed.
      const Request head = HeadRequest(client_->encryption(), key_, "HeadObject (Complete returned no ETag)");
      VF_ASSIGN_OR_RETURN(Response confirm, client_->Send(head, &cancel_));
      std::string length = confirm.Header("content-length");
      if (length != std::to_string(position_))
        return Status::IoError(Describe() + ": CompleteMultipartUpload returned no ETag and HEAD shows " +
                               (length.empty() ? "no size" : Printable(length, 64) + " bytes") + ", not the " +
                               std::to_string(position_) + " written");
    }
    Untrack();
    return Status::Ok();
  }

  // Send() retries a Complete whose reply was lost. Where the lost attempt
  // completed the upload, AWS and Ceph RGW answer the retry as they did the
  // first, but MinIO answers 404 NoSuchUpload, and the retries may run out
  // on a flaky network. So before `failure` stands, HEAD the object: when it
  // has the size written, and either this upload's token (its user metadata)
  // or the ETag S3 derives from the parts' ETags (none under SSE-KMS, whose
  // ETags are no MD5s), the stream is there, whole, and the upload is done.
  // Its id is then aborted, best effort: an upload already completed answers
  // 404, and one still open (an identical object was there before) goes.
  Status CompletedAfterAll(const Status& failure) {
    if (failure.code() == Status::Code::kCancelled) return failure;
    const Request head =
        HeadRequest(client_->encryption(), key_, "HeadObject (after CompleteMultipartUpload failed)", {404});
    Result<Response> confirm = client_->Send(head, &cancel_);
    if (!confirm.ok() || confirm->status != 200 || confirm->Header("content-length") != std::to_string(position_))
      return failure;
    const std::string derived = s3::MultipartETag(etags_);
    const bool ours = confirm->Header(kUploadTokenHeader) == upload_token_ ||
                      (!derived.empty() && confirm->Header("etag") == derived);
    if (!ours) return failure;
    // NoSuchUpload: the lost attempt completed it.
    const Request abort = AbortRequest(key_, upload_id_, /*absent_is_answer=*/true,
                                       "AbortMultipartUpload (after the object was found complete)");
    if (client_->Send(abort).ok()) Untrack();  // else the journal keeps it for `vramflow s3 cleanup`
    return Status::Ok();
  }

  Status Abort() {
    // Not cancellable: it is the cleanup.
    Result<Response> response = client_->Send(AbortRequest(key_, upload_id_, /*absent_is_answer=*/false));
    if (response.ok()) Untrack();  // else the journal keeps it for `vramflow s3 cleanup`
    return response.status();
  }

  std::shared_ptr<Client> client_;
  std::string key_;
  s3::PartPlan plan_;
  uint64_t budget_;
  unsigned concurrency_;
  std::atomic<bool> cancel_{false};

  std::string upload_id_;     // "" until the first part is full
  std::string upload_token_;  // this upload's kUploadTokenHeader
  std::vector<uint8_t> buffer_;
  uint64_t part_size_ = 0;  // of the part in buffer_
  uint32_t next_part_ = 1;
  uint64_t position_ = 0;  // stream bytes handed to parts (or the PUT)
  std::deque<InFlight> in_flight_;
  uint64_t in_flight_bytes_ = 0;
  std::vector<std::string> etags_;  // by part number - 1
  Status failed_;
  bool committed_ = false;
  std::string journal_dir_;
  CleanupRegistry* cleanup_;
  s3::JournaledUpload journal_;             // of the upload in progress
  std::shared_ptr<PendingUpload> pending_;  // shared with the interrupt's undo
  CleanupEntry interrupt_entry_;            // aborts it if the process is interrupted
};

// Refuses an existing object, as a file sink refuses an existing file.
// HEAD has no body to say why it failed: 301 (a wrong region) and 403
// (write-only credentials, or wrong ones) let the upload go on, which
// reports a real problem with S3's error code and a hint. A 400, and under
// SSE-C a 403, also come from an object encrypted with SSE-C that HEAD
// asked about without its key or with another one: a GET of its first byte
// without a key then says so in its error (AWS: InvalidRequest, "...stored
// using a form of Server Side Encryption..."; Ceph RGW: InvalidArgument,
// "Requests specifying Server Side Encryption with Customer provided keys
// ...").
Status RefuseExisting(Client& client, const std::string& key) {
  auto refuse = [&](const std::string& how) {
    return Status::AlreadyExists(client.Uri(key) + " exists" + how + " (use --force to overwrite)");
  };
  const bool sse_c = !client.encryption().customer_key.empty();
  VF_ASSIGN_OR_RETURN(Response head,
                      client.Send(HeadRequest(client.encryption(), key, "HeadObject (is there an object already?)",
                                              {301, 400, 403, 404})));
  if (head.status / 100 == 2) return refuse("");
  if (head.status != 400 && !(sse_c && head.status == 403)) return Status::Ok();
  Request probe;
  probe.method = "GET";
  probe.key = key;
  probe.headers = {{"Range", "bytes=0-0"}};
  probe.sign_payload = false;
  probe.answers = {301, 400, 403, 404, 416};
  probe.what = "GetObject bytes=0-0 without an SSE-C key (is there an object already?)";
  VF_ASSIGN_OR_RETURN(Response got, client.Send(probe));
  if (got.status / 100 == 2 || got.status == 416) return refuse(sse_c ? ", not encrypted with SSE-C" : "");
  std::string message = s3::XmlField(got.body, "Message").value_or("");
  std::transform(message.begin(), message.end(), message.begin(), [](unsigned char c) { return std::tolower(c); });
  if (got.status == 400 && message.find("server side encryption") != std::string::npos)
    return refuse(sse_c ? ", encrypted with another SSE-C key" : ", encrypted with SSE-C (read with --sse-c-key)");
  return Status::Ok();
}

}  // namespace

std::unique_ptr<ByteSink> NewS3Sink(std::shared_ptr<s3::Client> client, const std::string& key,
                                    const S3Options& options) {
  return std::make_unique<S3Sink>(std::move(client), key, options);
}

Result<std::unique_ptr<ByteSink>> OpenS3Sink(const std::string& bucket, const std::string& key,
                                             const S3Options& options) {
  VF_ASSIGN_OR_RETURN(s3::Config config, s3::LoadConfig(options));
  if (!options.journal_dir.empty()) {
    // Uploads a killed writer left pending are aborted by the next upload:
    // quickly, best effort (`vramflow s3 cleanup` reports what is left).
    S3Options quick = options;
    quick.retries = 0;
    quick.connect_timeout = std::min(quick.connect_timeout, std::chrono::milliseconds(3000));
    quick.stall_timeout = std::min(quick.stall_timeout, std::chrono::milliseconds(5000));
    (void)s3::AbortJournaledUploads(options.journal_dir, quick, /*include_live=*/false);
  }
  auto client = std::make_shared<s3::Client>(std::move(config), options, bucket);
  if (!options.overwrite) VF_RETURN_IF_ERROR(RefuseExisting(*client, key));
  return NewS3Sink(std::move(client), key, options);
}

}  // namespace vramflow
