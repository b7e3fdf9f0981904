// The few fields vramflow reads from S3's XML replies, found by hand: S3
// replies are small, machine-written documents, and we need only UploadId,
// ETag and an error's Code and Message, never structure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vramflow::s3 {

// The text of the first <name>...</name> (or nullopt), entities decoded.
// An empty element (<ETag></ETag> or <ETag/>) gives "".
std::optional<std::string> XmlField(std::string_view xml, std::string_view name);

// The texts of every <name>...</name>, in order (keys of a listing).
std::vector<std::string> XmlFields(std::string_view xml, std::string_view name);

// "&lt;" "&gt;" "&amp;" "&quot;" "&apos;" and &#N; / &#xN; decoded.
std::string XmlUnescape(std::string_view s);
// The reverse (< > &), for text we put in request bodies (ETags keep their quotes).
std::string XmlEscape(std::string_view s);

struct S3Error {
  std::string code;     // "SlowDown", "NoSuchKey"; "" when the body has none
  std::string message;
};
// An <Error> document's Code and Message; nullopt when `xml` is not one.
std::optional<S3Error> ParseError(std::string_view xml);

}  // namespace vramflow::s3
