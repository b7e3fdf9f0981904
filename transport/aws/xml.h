// SPDX-License-Identifier: MIT
// S3's and STS's XML replies, parsed with expat into a small element tree.
//
// Replies are small, machine-written documents; we read a few fields
// (UploadId, ETag, Key, an error's Code and Message, STS credentials). A
// real parser (not string search) means a field inside a comment, CDATA or
// an attribute is read as XML defines it, and malformed input is an error.
// Bounded: at most kMaxXmlBytes of input, kMaxXmlDepth levels and
// kMaxXmlElements elements; a DOCTYPE (entity declarations) is refused.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace vramflow::s3 {

inline constexpr size_t kMaxXmlBytes = 4u << 20;
inline constexpr size_t kMaxXmlDepth = 32;
inline constexpr size_t kMaxXmlElements = 200000;

struct XmlElement {
  std::string name;  // as written, namespace prefix included
  std::string text;  // the element's own character data, entities decoded
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  const XmlElement* Child(std::string_view name) const;
  // The first descendant (depth first, document order) named `name`.
  const XmlElement* Find(std::string_view name) const;
  // Every descendant named `name`, in document order.
  void FindAll(std::string_view name, std::vector<const XmlElement*>* out) const;
};

// The document's root element; errors say what is wrong and where (line).
Result<XmlElement> ParseXml(std::string_view xml);

// The text of the first element named `name` anywhere in the document, or
// nullopt (absent, or `xml` is not well-formed XML). <ETag/> gives "".
std::optional<std::string> XmlField(std::string_view xml, std::string_view name);

// The texts of every element named `name`, in order (keys of a listing);
// empty when `xml` is not well-formed.
std::vector<std::string> XmlFields(std::string_view xml, std::string_view name);

// < > & escaped, for text we put in request bodies (ETags keep their quotes).
std::string XmlEscape(std::string_view s);

struct S3Error {
  std::string code;  // "SlowDown", "NoSuchKey"; "" when the body has none
  std::string message;
};
// The Code and Message of an <Error> document (S3) or an <ErrorResponse>
// holding one (STS); nullopt when `xml` is neither.
std::optional<S3Error> ParseError(std::string_view xml);

}  // namespace vramflow::s3
