// SPDX-License-Identifier: MIT
#include "tests/support/s3_fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include "transport/aws/sigv4.h"
#include "transport/aws/xml.h"

namespace vramflow::testing {
namespace {

// The hex after "Signature=" in an Authorization header (clients separate
// its parts with "," or ", ").
std::string SignatureOf(const std::string& authorization) {
  size_t at = authorization.find("Signature=");
  return at == std::string::npos ? "" : authorization.substr(at + 10, 64);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string ErrorXml(const std::string& code, const std::string& message) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>" + message +
         "</Message></Error>";
}

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

struct FakeS3::HttpRequest {
  std::string method;
  std::string raw_path;  // as sent (URI-encoded), with the leading '/'
  std::string path;      // decoded, without the leading '/'
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct FakeS3::Reply {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<Fault> fault;
  size_t content_length_override = SIZE_MAX;  // HEAD: the object's size, without a body
};

FakeS3::FakeS3() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeS3::~FakeS3() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : connection_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(connections_);
  }
  stopped_.notify_all();
  for (std::thread& t : threads) t.join();
  ::close(listen_fd_);
}

void FakeS3::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    connection_fds_.push_back(fd);
    connections_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeS3::Arm(const std::string& op, Fault fault, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_[op].emplace_back(fault, times);
}

void FakeS3::SetOpaqueETags(bool opaque) {
  std::lock_guard lock(mu_);
  opaque_etags_ = opaque;
}

void FakeS3::SetEmptyCompleteETag(bool empty) {
  std::lock_guard<std::mutex> lock(mu_);
  empty_complete_etag_ = empty;
}

void FakeS3::SetRepeatedComplete(RepeatedComplete answer) {
  std::lock_guard<std::mutex> lock(mu_);
  repeated_complete_ = answer;
}

std::optional<std::string> FakeS3::Object(const std::string& bucket_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(bucket_key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

void FakeS3::PutObject(const std::string& bucket_key, std::string data) {
  std::lock_guard<std::mutex> lock(mu_);
  objects_[bucket_key] = std::move(data);
  multipart_etags_.erase(bucket_key);
}

void FakeS3::AddKey(const std::string& access_key, const std::string& secret_key, const std::string& session_token,
                    std::time_t expires) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_[access_key] = Key{secret_key, session_token, expires};
}

int FakeS3::SignedBy(const std::string& access_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = signed_by_.find(access_key);
  return it == signed_by_.end() ? 0 : it->second;
}

int FakeS3::Rejected(const std::string& code) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rejected_.find(code);
  return it == rejected_.end() ? 0 : it->second;
}

// Recomputes the request's SigV4 signature with the secret of the key it
// names (transport/aws/sigv4.h builds the canonical request from what was received).
std::string FakeS3::CheckSignature(const HttpRequest& r) {
  if (keys_.empty()) return "";
  std::string auth = r.Header("authorization");
  const std::string prefix = "AWS4-HMAC-SHA256 Credential=";
  if (auth.rfind(prefix, 0) != 0) return "AccessDenied";
  size_t slash = auth.find('/', prefix.size());
  size_t comma = auth.find(',', prefix.size());
  size_t signed_at = auth.find("SignedHeaders=");
  if (slash == std::string::npos || comma == std::string::npos || signed_at == std::string::npos)
    return "AuthorizationHeaderMalformed";
  std::string access_key = auth.substr(prefix.size(), slash - prefix.size());
  std::string scope = auth.substr(slash + 1, comma - slash - 1);  // DAY/REGION/s3/aws4_request
  size_t r1 = scope.find('/'), r2 = scope.find('/', r1 + 1);
  if (r1 == std::string::npos || r2 == std::string::npos) return "AuthorizationHeaderMalformed";
  std::string region = scope.substr(r1 + 1, r2 - r1 - 1);
  std::string signed_headers = auth.substr(signed_at + 14, auth.find(',', signed_at) - signed_at - 14);
  std::string signature = SignatureOf(auth);
  auto key = keys_.find(access_key);
  if (key == keys_.end()) return "InvalidAccessKeyId";
  std::string payload_hash = r.Header("x-amz-content-sha256");
  if (payload_hash != s3::kUnsignedPayload && payload_hash != s3::Sha256Hex(r.body)) return "XAmzContentSHA256Mismatch";
  s3::SignRequest sign{r.method, r.raw_path, {}, {}, payload_hash};
  for (const auto& [k, v] : r.query) sign.query.emplace_back(k, v);
  size_t pos = 0;
  while (pos <= signed_headers.size()) {
    size_t semi = signed_headers.find(';', pos);
    std::string name = signed_headers.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    sign.headers.emplace_back(name, r.Header(name));
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  s3::Credentials credentials{access_key, key->second.secret, ""};
  if (SignatureOf(s3::Authorization(credentials, region, r.Header("x-amz-date"), sign)) != signature)
    return "SignatureDoesNotMatch";
  const Key& k = key->second;
  if (!k.token.empty()) {
    if (signed_headers.find("x-amz-security-token") == std::string::npos || r.Header("x-amz-security-token") != k.token)
      return "InvalidToken";
    if (k.expires != 0 && std::time(nullptr) >= k.expires) return "ExpiredToken";
  }
  ++signed_by_[access_key];
  return "";
}

int FakeS3::Count(const std::string& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

size_t FakeS3::OpenUploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return uploads_.size();
}

std::vector<size_t> FakeS3::LastPartSizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_part_sizes_;
}

std::string FakeS3::OpName(const HttpRequest& r) const {
  bool upload_id = r.query.count("uploadId") > 0;
  if (r.method == "POST" && r.query.count("uploads")) return "CreateMultipartUpload";
  if (r.method == "PUT" && r.query.count("partNumber")) return "UploadPart";
  if (r.method == "POST" && upload_id) return "CompleteMultipartUpload";
  if (r.method == "DELETE" && upload_id) return "AbortMultipartUpload";
  if (r.method == "PUT") return "PutObject";
  if (r.method == "HEAD") return "HeadObject";
  if (r.method == "GET" && r.query.count("list-type")) return "ListObjectsV2";
  if (r.method == "GET") return "GetObject";
  return "Unknown";
}

// Holds the connection open without replying until the server stops (the
// client's stall timeout fires first and it closes its end).
void FakeS3::Stall(int fd) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, 50);
    if (stop_) return;
    if (n > 0) {
      char c;
      if (::recv(fd, &c, 1, MSG_PEEK) <= 0) return;  // the client gave up
    }
  }
}

void FakeS3::Serve(int fd) {
  std::string in;
  char buf[64 * 1024];
  for (;;) {
    size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) goto done;
      in.append(buf, static_cast<size_t>(n));
    }
    HttpRequest r;
    {
      std::string head = in.substr(0, end);
      in.erase(0, end + 4);
      size_t line_end = head.find("\r\n");
      std::string line = head.substr(0, line_end);
      size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
      r.method = line.substr(0, sp1);
      std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t q = target.find('?');
      r.raw_path = target.substr(0, q);
      r.path = UrlDecode(target.substr(1, q == std::string::npos ? std::string::npos : q - 1));
      if (q != std::string::npos) {
        std::string query = target.substr(q + 1);
        size_t pos = 0;
        while (pos <= query.size()) {
          size_t amp = query.find('&', pos);
          std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
          size_t eq = kv.find('=');
          r.query[UrlDecode(kv.substr(0, eq))] = eq == std::string::npos ? "" : UrlDecode(kv.substr(eq + 1));
          if (amp == std::string::npos) break;
          pos = amp + 1;
        }
      }
      size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        size_t e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string h = head.substr(pos, e - pos);
        size_t colon = h.find(':');
        if (colon != std::string::npos) {
          size_t v = h.find_first_not_of(' ', colon + 1);
          r.headers[Lower(h.substr(0, colon))] = v == std::string::npos ? "" : h.substr(v);
        }
        pos = e + 2;
      }
    }
    size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    // The aws CLI asks before sending a body; say go on.
    if (Lower(r.Header("expect")) == "100-continue" && in.size() < length &&
        !SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n"))
      break;
    while (in.size() < length) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) goto done;
      in.append(buf, static_cast<size_t>(n));
    }
    r.body = in.substr(0, length);
    in.erase(0, length);

    int now = ++concurrent_;
    for (int seen = max_concurrent_; now > seen && !max_concurrent_.compare_exchange_weak(seen, now);) {
    }
    Reply reply = Handle(r);
    --concurrent_;
    if (reply.fault == Fault::kCloseConnection || reply.fault == Fault::kLoseReply) break;
    if (reply.fault == Fault::kStall) {
      Stall(fd);
      break;
    }
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\n";
    size_t content_length =
        reply.content_length_override != SIZE_MAX ? reply.content_length_override : reply.body.size();
    out += "Content-Length: " + std::to_string(content_length) + "\r\n";
    for (const auto& [k, v] : reply.headers) out += k + ": " + v + "\r\n";
    out += "\r\n";
    if (r.method != "HEAD") out += reply.body;
    if (!SendAll(fd, out)) break;
  }
done:
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  for (int& f : connection_fds_)
    if (f == fd) f = -1;
}

FakeS3::Reply FakeS3::Handle(const HttpRequest& r) {
  std::string op = OpName(r);
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[op];
  Reply reply;
  if (std::string refused = CheckSignature(r); !refused.empty()) {
    ++rejected_[refused];
    return Reply{refused == "ExpiredToken" || refused == "XAmzContentSHA256Mismatch" ? 400 : 403,
                 ErrorXml(refused, "refused by the fake S3: " + refused),
                 {},
                 {}};
  }
  bool lose_reply = false;
  for (const std::string& key : {op, std::string("*")}) {
    auto& armed = faults_[key];
    if (armed.empty()) continue;
    Fault fault = armed.front().first;
    if (--armed.front().second <= 0) armed.erase(armed.begin());
    if (fault == Fault::kLoseReply) {
      lose_reply = true;
      break;
    }
    if (fault == Fault::kInternalError500) return Reply{500, ErrorXml("InternalError", "injected"), {}, {}};
    if (fault == Fault::kSlowDown503)
      return Reply{503, ErrorXml("SlowDown", "Please reduce your request rate."), {}, {}};
    reply.fault = fault;
    return reply;
  }

  Reply carried_out = Carry(op, r);
  if (lose_reply) carried_out.fault = Fault::kLoseReply;
  return carried_out;
}

// Carries out an accepted request; called with mu_ held.
std::string FakeS3::PartETag(const std::string& data) const {
  return "\"" + (opaque_etags_ ? s3::Md5Hex(Bytes("sse-kms:" + data)) : s3::Md5Hex(Bytes(data))) + "\"";
}

namespace {

// The request's user metadata (x-amz-meta-*), which S3 stores with the object.
std::map<std::string, std::string> UserMetadata(const std::map<std::string, std::string>& headers) {
  std::map<std::string, std::string> metadata;
  for (const auto& [name, value] : headers)
    if (name.rfind("x-amz-meta-", 0) == 0) metadata[name] = value;
  return metadata;
}

// SSE-C as AWS documents it ("Using server-side encryption with
// customer-provided keys"): the three headers go together, the algorithm is
// AES256 and the MD5 is the key's. Returns the error code of a request
// that gets them wrong, else "" and the key's MD5 in `md5` ("" without).
std::string CustomerKey(const std::map<std::string, std::string>& headers, std::string* md5) {
  auto header = [&](const char* name) {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  };
  const std::string algorithm = header("x-amz-server-side-encryption-customer-algorithm");
  const std::string key = header("x-amz-server-side-encryption-customer-key");
  *md5 = header("x-amz-server-side-encryption-customer-key-md5");
  if (algorithm.empty() && key.empty() && md5->empty()) return "";
  if (algorithm != "AES256" || key.empty() || md5->empty()) return "InvalidArgument";
  std::string raw(48, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                                reinterpret_cast<const unsigned char*>(key.data()), static_cast<int>(key.size()));
  if (n != 33) return "InvalidArgument";  // 32 bytes and the padding's zero
  raw.resize(32);
  if (s3::Md5Base64(Bytes(raw)) != *md5) return "InvalidArgument";
  return "";
}

}  // namespace

FakeS3::Reply FakeS3::Carry(const std::string& op, const HttpRequest& r) {
  Reply reply;
  auto error = [](int status, const std::string& code) { return Reply{status, ErrorXml(code, code), {}, {}}; };
  std::string key_md5;
  if (std::string bad = CustomerKey(r.headers, &key_md5); !bad.empty()) return error(400, bad);
  if (!key_md5.empty()) {  // S3 echoes SSE-C on every request that carries it
    reply.headers.emplace_back("x-amz-server-side-encryption-customer-algorithm", "AES256");
    reply.headers.emplace_back("x-amz-server-side-encryption-customer-key-MD5", key_md5);
  }
  const std::string sse = r.Header("x-amz-server-side-encryption");
  if (!sse.empty() && (op == "CreateMultipartUpload" || op == "PutObject"))  // echoed, as AWS does
    reply.headers.emplace_back("x-amz-server-side-encryption", sse);
  if (op == "CreateMultipartUpload") {
    std::string id = "upload-" + std::to_string(next_upload_++);
    uploads_[id] = Upload{r.path, {}, UserMetadata(r.headers), key_md5};
    reply.body = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><UploadId>" + id +
                 "</UploadId></InitiateMultipartUploadResult>";
    return reply;
  }
  if (op == "UploadPart" || op == "PutObject") {
    std::string md5 = r.Header("content-md5");
    if (!md5.empty() && md5 != s3::Md5Base64(Bytes(r.body))) return error(400, "BadDigest");
    std::string etag = PartETag(r.body);
    if (op == "PutObject") {
      objects_[r.path] = r.body;
      object_metadata_[r.path] = UserMetadata(r.headers);
      object_key_md5_[r.path] = key_md5;
      multipart_etags_.erase(r.path);
    } else {
      auto it = uploads_.find(r.query.at("uploadId"));
      if (it == uploads_.end()) return error(404, "NoSuchUpload");
      // A part of an SSE-C upload carries the Create's key, and only it.
      if (key_md5 != it->second.customer_key_md5) return error(400, "InvalidRequest");
      it->second.parts[std::stoi(r.query.at("partNumber"))] = r.body;
    }
    reply.headers.emplace_back("ETag", etag);
    return reply;
  }
  if (op == "CompleteMultipartUpload") {
    const std::string& id = r.query.at("uploadId");
    if (auto done = completed_uploads_.find(id); done != completed_uploads_.end()) {
      if (repeated_complete_ == RepeatedComplete::kInternalError500) return error(500, "InternalError");
      if (repeated_complete_ == RepeatedComplete::kSameAnswer) return Reply{200, done->second, {}, {}};
    }
    auto it = uploads_.find(id);
    if (it == uploads_.end()) return error(404, "NoSuchUpload");
    std::vector<std::string> numbers = s3::XmlFields(r.body, "PartNumber");
    std::vector<std::string> etags = s3::XmlFields(r.body, "ETag");
    if (numbers.empty() || numbers.size() != etags.size()) return error(400, "MalformedXML");
    std::string object;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < numbers.size(); ++i) {
      auto part = it->second.parts.find(std::stoi(numbers[i]));
      if (part == it->second.parts.end() || etags[i] != PartETag(part->second)) return error(400, "InvalidPart");
      object += part->second;
      sizes.push_back(part->second.size());
    }
    const std::string object_etag =
        opaque_etags_ ? "\"" + s3::Md5Hex(Bytes("sse-kms:" + object)) + "-" + std::to_string(numbers.size()) + "\""
                      : s3::MultipartETag(etags);
    objects_[it->second.bucket_key] = object;
    object_metadata_[it->second.bucket_key] = it->second.metadata;
    object_key_md5_[it->second.bucket_key] = it->second.customer_key_md5;
    multipart_etags_[it->second.bucket_key] = object_etag;
    last_part_sizes_ = sizes;
    uploads_.erase(it);
    const std::string etag = empty_complete_etag_ ? "" : s3::XmlEscape(object_etag);
    reply.body = "<?xml version=\"1.0\"?><CompleteMultipartUploadResult><ETag>" + etag +
                 "</ETag></CompleteMultipartUploadResult>";
    completed_uploads_[id] = reply.body;
    return reply;
  }
  if (op == "AbortMultipartUpload") {
    if (uploads_.erase(r.query.at("uploadId")) == 0) return error(404, "NoSuchUpload");
    reply.status = 204;
    return reply;
  }
  if (op == "ListObjectsV2") {
    std::string prefix = r.path + "/" + (r.query.count("prefix") ? r.query.at("prefix") : "");
    reply.body = "<?xml version=\"1.0\"?><ListBucketResult>";
    for (const auto& [k, v] : objects_)
      if (k.rfind(prefix, 0) == 0) reply.body += "<Contents><Key>" + k.substr(r.path.size() + 1) + "</Key></Contents>";
    reply.body += "</ListBucketResult>";
    return reply;
  }
  auto it = objects_.find(r.path);
  if (it == objects_.end()) return error(404, "NoSuchKey");
  // Reads of an SSE-C object need its key; AWS's answers and messages.
  const std::string& stored_md5 = object_key_md5_[r.path];
  auto refuse = [](int status, const std::string& code, const std::string& message) {
    return Reply{status, ErrorXml(code, message), {}, {}};
  };
  if (!stored_md5.empty() && key_md5.empty())
    return refuse(400, "InvalidRequest",
                  "The object was stored using a form of Server Side Encryption. The correct parameters must be "
                  "provided to retrieve the object.");
  if (!stored_md5.empty() && key_md5 != stored_md5)
    return refuse(403, "AccessDenied", "The calculated MD5 hash of the key did not match the hash that was provided.");
  if (stored_md5.empty() && !key_md5.empty())
    return refuse(400, "InvalidRequest", "The encryption parameters are not applicable to this object.");
  const std::string& data = it->second;
  auto multipart = multipart_etags_.find(r.path);
  std::string etag = multipart != multipart_etags_.end() ? multipart->second : PartETag(data);
  reply.headers.emplace_back("ETag", etag);
  for (const auto& [name, value] : object_metadata_[r.path]) reply.headers.emplace_back(name, value);
  if (op == "HeadObject") {
    reply.content_length_override = data.size();
    return reply;
  }
  std::string if_match = r.Header("if-match");
  if (!if_match.empty() && if_match != etag) return error(412, "PreconditionFailed");
  std::string range = r.Header("range");
  if (range.empty()) {
    reply.body = data;
    return reply;
  }
  size_t dash = range.find('-');
  uint64_t first = std::stoull(range.substr(6, dash - 6));
  uint64_t last = std::stoull(range.substr(dash + 1));
  if (first >= data.size() || last < first) return error(416, "InvalidRange");
  last = std::min<uint64_t>(last, data.size() - 1);
  reply.status = 206;
  reply.body = data.substr(first, last - first + 1);
  reply.headers.emplace_back("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                                  std::to_string(data.size()));
  return reply;
}

}  // namespace vramflow::testing
