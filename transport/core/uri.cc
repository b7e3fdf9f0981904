// SPDX-License-Identifier: MIT
#include "transport/core/uri.h"

#include <cctype>
#include <optional>
#include <string_view>

namespace vramflow {
namespace {

constexpr const char* kSupported = "(supported: PATH, -, fd:N, unix:PATH, tcp://HOST:PORT, s3://BUCKET/KEY)";
constexpr unsigned kMaxStreams = 64;

Status Bad(const std::string& uri, const std::string& what) {
  return Status::InvalidArgument("invalid URI '" + uri + "': " + what);
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A decimal number without sign or junk, at most `max`; nullopt otherwise.
std::optional<unsigned long> ParseDecimal(std::string_view s, unsigned long max) {
  if (!AllDigits(s) || s.size() > 10) return std::nullopt;
  unsigned long value = 0;
  for (char c : s) value = value * 10 + static_cast<unsigned long>(c - '0');
  if (value > max) return std::nullopt;
  return value;
}

// "scheme" of "scheme://...", lower-cased, or "" when `uri` has none.
std::string SchemeOf(const std::string& uri) {
  size_t sep = uri.find("://");
  if (sep == std::string::npos || sep == 0) return "";
  if (!std::isalpha(static_cast<unsigned char>(uri[0]))) return "";
  std::string scheme;
  for (size_t i = 0; i < sep; ++i) {
    auto c = static_cast<unsigned char>(uri[i]);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return "";
    scheme += static_cast<char>(std::tolower(c));
  }
  return scheme;
}

// Applies "key=value&..." (the part after '?') to `endpoint`.
Status ParseQuery(const std::string& uri, std::string_view query, Endpoint* endpoint) {
  bool seen_streams = false;
  for (;;) {
    size_t amp = query.find('&');
    std::string_view param = query.substr(0, amp);
    size_t eq = param.find('=');
    std::string key(param.substr(0, eq));
    if (param.empty() || eq == std::string_view::npos)
      return Bad(uri, "query parameter '" + std::string(param) + "' is not KEY=VALUE");
    std::string_view value = param.substr(eq + 1);
    if (key != "streams") return Bad(uri, "unknown query parameter '" + key + "' (known: streams)");
    if (seen_streams) return Bad(uri, "'streams' given twice");
    seen_streams = true;
    auto n = ParseDecimal(value, kMaxStreams);
    if (!n || *n == 0)
      return Bad(uri, "streams must be a number from 1 to " + std::to_string(kMaxStreams) + ", not '" +
                          std::string(value) + "'");
    endpoint->streams = static_cast<unsigned>(*n);
    if (amp == std::string_view::npos) return Status::Ok();
    query.remove_prefix(amp + 1);
  }
}

// Splits "body?query" and applies the query; returns the body.
Result<std::string_view> TakeQuery(const std::string& uri, std::string_view rest, Endpoint* endpoint) {
  size_t q = rest.find('?');
  if (q == std::string_view::npos) return rest;
  VF_RETURN_IF_ERROR(ParseQuery(uri, rest.substr(q + 1), endpoint));
  return rest.substr(0, q);
}

bool IsHostNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; }

Status ParseTcp(const std::string& uri, std::string_view rest, Endpoint* endpoint) {
  VF_ASSIGN_OR_RETURN(std::string_view authority, TakeQuery(uri, rest, endpoint));
  if (authority.find('/') != std::string_view::npos) return Bad(uri, "a tcp:// URI has no path; write tcp://HOST:PORT");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    // Bracketed IPv6 literal: [addr]:port.
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(uri, "missing ']' after the IPv6 address");
    std::string_view host = authority.substr(1, close - 1);
    if (host.empty() || host.find(':') == std::string_view::npos) return Bad(uri, "'[...]' must hold an IPv6 address");
    for (char c : host)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.' && c != '%' && !IsHostNameChar(c))
        return Bad(uri, "invalid character in the IPv6 address");
    endpoint->host = std::string(host);
    std::string_view after = authority.substr(close + 1);
    if (after.empty() || after.front() != ':') return Bad(uri, "missing ':PORT' after the IPv6 address");
    port = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    if (colon == std::string_view::npos) return Bad(uri, "missing ':PORT' (write tcp://HOST:PORT)");
    std::string_view host = authority.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return Bad(uri, "IPv6 addresses go in brackets: tcp://[::1]:PORT");
    for (char c : host)
      if (!IsHostNameChar(c)) return Bad(uri, "invalid character '" + std::string(1, c) + "' in the host");
    endpoint->host = std::string(host);  // "" = all addresses (listening)
    port = authority.substr(colon + 1);
  }
  auto number = ParseDecimal(port, 65535);
  if (!number) return Bad(uri, "port must be a number from 0 to 65535, not '" + std::string(port) + "'");
  endpoint->port = static_cast<uint16_t>(*number);
  endpoint->kind = Endpoint::Kind::kTcp;
  return Status::Ok();
}

// s3://BUCKET/KEY. Bucket names follow S3's rules (3-63 of a-z 0-9 . -);
// the key is any non-empty text. A query is refused, not silently kept in
// the key.
Status ParseS3(const std::string& uri, std::string_view rest, Endpoint* endpoint) {
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  if (bucket.empty()) return Bad(uri, "missing bucket (write s3://BUCKET/KEY)");
  if (bucket.size() < 3 || bucket.size() > 63) return Bad(uri, "an S3 bucket name has 3 to 63 characters");
  for (char c : bucket)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-'))
      return Bad(uri, "invalid character '" + std::string(1, c) + "' in the bucket name (allowed: a-z 0-9 . -)");
  if (slash == std::string_view::npos || slash + 1 == rest.size())
    return Bad(uri, "missing object key (write s3://BUCKET/KEY)");
  std::string_view key = rest.substr(slash + 1);
  if (key.find('?') != std::string_view::npos) return Bad(uri, "s3:// URIs take no query ('?') in the key");
  endpoint->kind = Endpoint::Kind::kS3;
  endpoint->bucket = std::string(bucket);
  endpoint->key = std::string(key);
  return Status::Ok();
}

// When `uri` reads as a network address written without its scheme
// ("10.0.0.2:7070", "host:7070/x", "[::1]:7070", ":7070"), the tcp:// URI it
// probably meant; nullopt for anything else. Only the part before the first
// '/' counts, so "/data/a:1" or "dir/b:2" stay paths.
std::optional<std::string> MissingTcpScheme(std::string_view uri) {
  std::string_view authority = uri.substr(0, uri.find('/'));
  std::string_view host, port;
  if (authority.starts_with('[')) {
    size_t close = authority.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    if (host.find(':') == std::string_view::npos) return std::nullopt;
    for (char c : host)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.' && c != '%' && !IsHostNameChar(c))
        return std::nullopt;
    port = authority.substr(close + 2);
    host = authority.substr(0, close + 1);
  } else {
    size_t colon = authority.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    for (char c : host)
      if (!IsHostNameChar(c)) return std::nullopt;
  }
  if (!ParseDecimal(port, 65535)) return std::nullopt;
  return "tcp://" + std::string(host) + ":" + std::string(port);
}

}  // namespace

Result<Endpoint> ParseEndpoint(const std::string& uri) {
  Endpoint endpoint;
  endpoint.uri = uri;
  if (uri.empty())
    return Status::InvalidArgument("empty URI (expected PATH, -, fd:N, unix:PATH, tcp://HOST:PORT or s3://BUCKET/KEY)");
  std::string_view view(uri);

  if (uri == "-") {
    endpoint.kind = Endpoint::Kind::kStdio;
    return endpoint;
  }
  if (view.starts_with("fd:")) {
    auto fd = ParseDecimal(view.substr(3), 0x7fffffff);
    if (!fd) return Bad(uri, "fd:N needs a non-negative decimal file descriptor number");
    endpoint.kind = Endpoint::Kind::kFd;
    endpoint.fd = static_cast<int>(*fd);
    return endpoint;
  }
  if (view.starts_with("systemd:")) {
    if (uri != "systemd:") return Bad(uri, "write systemd: alone (the socket systemd passed; no path or query)");
    endpoint.kind = Endpoint::Kind::kSystemd;
    return endpoint;
  }
  if (view.starts_with("unix:")) {
    std::string_view rest = view.substr(5);
    if (rest.starts_with("//")) return Bad(uri, "write unix:PATH (e.g. unix:/run/vramflow.sock), not unix://");
    VF_ASSIGN_OR_RETURN(std::string_view path, TakeQuery(uri, rest, &endpoint));
    if (path.empty()) return Bad(uri, "unix: needs a socket path");
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.path = std::string(path);
    return endpoint;
  }
  std::string scheme = SchemeOf(uri);
  if (scheme == "tcp") {
    VF_RETURN_IF_ERROR(ParseTcp(uri, view.substr(6), &endpoint));
    return endpoint;
  }
  if (scheme == "s3") {
    VF_RETURN_IF_ERROR(ParseS3(uri, view.substr(5), &endpoint));
    return endpoint;
  }
  if (!scheme.empty())
    return Status::NotSupported("unsupported URI scheme '" + uri.substr(0, uri.find("://")) + "' in '" + uri + "' " +
                                kSupported);
  // "tcp:host:port" is almost surely a mistyped URI, not a file name.
  if (view.starts_with("tcp:")) return Bad(uri, "write tcp://HOST:PORT (for a file of that name, write ./" + uri + ")");
  // "10.0.0.2:7070" is a network address without its scheme, not a file
  // name: writing a file called that would "succeed" without sending.
  if (std::optional<std::string> meant = MissingTcpScheme(view))
    return Bad(uri, "this looks like a network address without its scheme: did you mean " + *meant +
                        "? (for a file of that name, write ./" + uri + ")");

  endpoint.kind = Endpoint::Kind::kPath;
  endpoint.path = uri;
  return endpoint;
}

}  // namespace vramflow
