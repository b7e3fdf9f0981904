// SPDX-License-Identifier: MIT
// FakeS3: a tiny in-process S3 on loopback for the s3:// transport tests.
//
// It speaks HTTP/1.1 with keep-alive and implements just what the sink and
// source use: CreateMultipartUpload, UploadPart (checks Content-MD5),
// CompleteMultipartUpload (checks part ETags), AbortMultipartUpload,
// PutObject, HeadObject, GetObject with Range and If-Match, and
// ListObjectsV2 keys. Objects live in memory under "bucket/key" (path-style
// requests only). Once AddKey() names a key it checks every request as S3
// does: the SigV4 signature against that key's secret, the payload hash, and
// the session token handed out with it (missing or wrong: 403 InvalidToken;
// past its expiry: 400 ExpiredToken). Faults are armed per
// operation: the next N matching requests get a 500, a 503 SlowDown, a
// closed connection, a stall (no reply) until the connection is closed, or
// are carried out and their reply lost (the connection closed instead).
// Objects carry the ETags S3 gives them: the MD5 of a PUT's body, the MD5 of
// the parts' MD5s and "-N" for a multipart upload. Server-side encryption
// as AWS documents it: x-amz-server-side-encryption is echoed; an SSE-C
// object (its key's headers checked, echoed) is read only with its key:
// without one 400 InvalidRequest, with another 403 AccessDenied, and a key
// for an object without SSE-C 400 InvalidRequest, with AWS's messages.
// Thread-safe; destroying it stops every connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace vramflow::testing {

class FakeS3 {
 public:
  enum class Fault { kInternalError500, kSlowDown503, kCloseConnection, kStall, kLoseReply };
  // What a Complete of an upload that is already completed gets: AWS S3
  // answers as it did the first time (so does Ceph RGW 16), MinIO 404 NoSuchUpload; or a 500.
  enum class RepeatedComplete { kSameAnswer, kNoSuchUpload404, kInternalError500 };

  FakeS3();
  ~FakeS3();
  FakeS3(const FakeS3&) = delete;
  FakeS3& operator=(const FakeS3&) = delete;

  // "http://127.0.0.1:PORT".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // The next `times` requests of operation `op` ("UploadPart", "GetObject",
  // ..., or "*" for any) get `fault`.
  void Arm(const std::string& op, Fault fault, int times);
  // Accepts requests signed by `access_key` (and, when `session_token` is
  // set, carrying it) until `expires` (0: never). Thread-safe; the first
  // call turns signature checking on.
  void AddKey(const std::string& access_key, const std::string& secret_key, const std::string& session_token = "",
              std::time_t expires = 0);
  // Requests accepted per access key, and rejections per S3 error code
  // ("SignatureDoesNotMatch", "ExpiredToken", ...).
  int SignedBy(const std::string& access_key) const;
  int Rejected(const std::string& code) const;
  // Complete replies with <ETag></ETag>, as Ceph RGW 16 does.
  void SetEmptyCompleteETag(bool empty);
  // ETags that are no MD5 of the bytes, as under SSE-KMS: a part's and a
  // completed object's are opaque (a client cannot derive the object's from
  // the parts').
  void SetOpaqueETags(bool opaque);
  void SetRepeatedComplete(RepeatedComplete answer);

  std::optional<std::string> Object(const std::string& bucket_key) const;
  void PutObject(const std::string& bucket_key, std::string data);
  // Requests seen per operation (faulted ones included).
  int Count(const std::string& op) const;
  // Multipart uploads created and neither completed nor aborted.
  size_t OpenUploads() const;
  // Part sizes (by part number) of the last completed multipart upload.
  std::vector<size_t> LastPartSizes() const;
  // The largest number of requests handled at the same time.
  int MaxConcurrent() const { return max_concurrent_; }

 private:
  struct HttpRequest;
  struct Reply;
  struct Key {
    std::string secret, token;
    std::time_t expires = 0;
  };
  struct Upload {
    std::string bucket_key;
    std::map<int, std::string> parts;
    std::map<std::string, std::string> metadata;  // x-amz-meta-* of the Create, for the object
    std::string customer_key_md5;                 // SSE-C: the Create's key's MD5, for the parts and the object
  };
  // A part's ETag: the MD5 of its bytes, or with opaque ETags another digest.
  std::string PartETag(const std::string& data) const;

  void AcceptLoop();
  void Serve(int fd);
  Reply Handle(const HttpRequest& request);
  Reply Carry(const std::string& op, const HttpRequest& request);
  // Empty when the request is signed as S3 requires; else the error code.
  std::string CheckSignature(const HttpRequest& request);
  std::string OpName(const HttpRequest& request) const;
  void Stall(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::condition_variable stopped_;
  std::vector<std::thread> connections_;                                       // GUARDED_BY(mu_)
  std::vector<int> connection_fds_;                                            // GUARDED_BY(mu_)
  std::map<std::string, std::string> objects_;                                 // GUARDED_BY(mu_)
  std::map<std::string, std::map<std::string, std::string>> object_metadata_;  // GUARDED_BY(mu_), x-amz-meta-*
  std::map<std::string, std::string> object_key_md5_;     // GUARDED_BY(mu_), SSE-C objects: their key's MD5
  std::map<std::string, std::string> multipart_etags_;    // GUARDED_BY(mu_), by bucket/key
  std::map<std::string, std::string> completed_uploads_;  // GUARDED_BY(mu_), id -> the Complete's reply body
  RepeatedComplete repeated_complete_ = RepeatedComplete::kNoSuchUpload404;  // GUARDED_BY(mu_)
  std::map<std::string, Upload> uploads_;                                    // GUARDED_BY(mu_)
  std::map<std::string, std::vector<std::pair<Fault, int>>> faults_;         // GUARDED_BY(mu_)
  std::map<std::string, int> counts_;                                        // GUARDED_BY(mu_)
  std::map<std::string, Key> keys_;                                          // GUARDED_BY(mu_)
  std::map<std::string, int> signed_by_;                                     // GUARDED_BY(mu_)
  std::map<std::string, int> rejected_;                                      // GUARDED_BY(mu_)
  std::vector<size_t> last_part_sizes_;                                      // GUARDED_BY(mu_)
  bool empty_complete_etag_ = false;                                         // GUARDED_BY(mu_)
  bool opaque_etags_ = false;                                                // GUARDED_BY(mu_)
  int next_upload_ = 1;                                                      // GUARDED_BY(mu_)
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
};

}  // namespace vramflow::testing
