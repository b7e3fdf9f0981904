// SPDX-License-Identifier: MIT
#include "transport/aws/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/md5.h>

#include <algorithm>
#include <cctype>

#include "common/hex.h"

namespace vramflow::s3 {
namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

std::string Digest(const EVP_MD* md, const void* data, size_t n) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, out, &len, md, nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string HexOf(const std::string& raw) {
  return Hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Header values: leading/trailing spaces dropped, inner runs of spaces
// folded to one (SigV4 "Trimall").
std::string TrimAll(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::span<const uint8_t> data) { return HexOf(Digest(EVP_sha256(), data.data(), data.size())); }
std::string Sha256Hex(std::string_view data) { return HexOf(Digest(EVP_sha256(), data.data(), data.size())); }
std::string Md5Hex(std::span<const uint8_t> data) { return HexOf(Digest(EVP_md5(), data.data(), data.size())); }

std::string Base64(std::span<const uint8_t> data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');  // and EVP_EncodeBlock's NUL
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(), static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Md5Base64(std::span<const uint8_t> data) {
  const std::string raw = Digest(EVP_md5(), data.data(), data.size());
  return Base64(std::span(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
}

std::string MultipartETag(const std::vector<std::string>& part_etags) {
  if (part_etags.empty()) return "";
  std::string digests;  // the parts' MD5s, 16 bytes each
  for (const std::string& etag : part_etags) {
    if (etag.size() != 34 || etag.front() != '"' || etag.back() != '"') return "";
    for (size_t i = 1; i < 33; i += 2) {
      const int high = HexDigitValue(etag[i]), low = HexDigitValue(etag[i + 1]);
      if (high < 0 || low < 0) return "";
      digests += static_cast<char>(high << 4 | low);
    }
  }
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive)
  // about a string literal + std::string here.
  std::string etag(1, '"');
  etag += HexOf(Digest(EVP_md5(), digests.data(), digests.size()));
  etag += '-';
  etag += std::to_string(part_etags.size());
  etag += '"';
  return etag;
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string AmzDate(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  for (const auto& [k, v] : query) encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

std::string CanonicalRequest(const SignRequest& request, std::string* signed_headers) {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [k, v] : request.headers) headers.emplace_back(Lower(k), TrimAll(v));
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers;
  signed_headers->clear();
  for (const auto& [k, v] : headers) {
    canonical_headers += k + ":" + v + "\n";
    if (!signed_headers->empty()) *signed_headers += ';';
    *signed_headers += k;
  }
  return request.method + "\n" + request.path + "\n" + CanonicalQuery(request.query) + "\n" + canonical_headers + "\n" +
         *signed_headers + "\n" + request.payload_hash;
}

std::string Authorization(const Credentials& credentials, const std::string& region, const std::string& amz_date,
                          const SignRequest& request, std::string_view service) {
  std::string signed_headers;
  std::string canonical = CanonicalRequest(request, &signed_headers);
  std::string day = amz_date.substr(0, 8);
  std::string scope = day + "/" + region + "/" + std::string(service) + "/aws4_request";
  std::string to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
  std::string key = Hmac("AWS4" + credentials.secret_key, day);
  key = Hmac(key, region);
  key = Hmac(key, std::string(service));
  key = Hmac(key, "aws4_request");
  return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key + "/" + scope + ",SignedHeaders=" + signed_headers +
         ",Signature=" + HexOf(Hmac(key, to_sign));
}

}  // namespace vramflow::s3
