// SPDX-License-Identifier: MIT
#include "transport/aws/xml.h"

#include <expat.h>

#include <memory>

namespace vramflow::s3 {
namespace {

struct ParserDeleter {
  void operator()(XML_Parser p) const { XML_ParserFree(p); }
};

// Builds the tree from expat's callbacks; `path` holds the open elements.
struct Builder {
  XML_Parser parser = nullptr;
  XmlElement root;
  std::vector<XmlElement*> path;
  size_t elements = 0;
  bool have_root = false;
  std::string error;

  void Stop(std::string why) {
    if (error.empty()) error = std::move(why);
    XML_StopParser(parser, XML_FALSE);
  }
};

void OnStart(void* user, const XML_Char* name, const XML_Char**) {
  auto* b = static_cast<Builder*>(user);
  if (++b->elements > kMaxXmlElements) return b->Stop("more than " + std::to_string(kMaxXmlElements) + " elements");
  if (b->path.size() >= kMaxXmlDepth) return b->Stop("nested deeper than " + std::to_string(kMaxXmlDepth) + " levels");
  if (b->path.empty()) {
    b->root.name = name;
    b->have_root = true;
    b->path.push_back(&b->root);
    return;
  }
  XmlElement& parent = *b->path.back();
  parent.children.push_back(XmlElement{name, {}, {}});
  b->path.push_back(&parent.children.back());
}

void OnEnd(void* user, const XML_Char*) {
  auto* b = static_cast<Builder*>(user);
  if (!b->path.empty()) b->path.pop_back();
}

void OnText(void* user, const XML_Char* s, int len) {
  auto* b = static_cast<Builder*>(user);
  if (!b->path.empty()) b->path.back()->text.append(s, static_cast<size_t>(len));
}

void OnDoctype(void* user, const XML_Char*, const XML_Char*, const XML_Char*, int) {
  static_cast<Builder*>(user)->Stop("a DOCTYPE is not accepted");
}

void Collect(const XmlElement& e, std::string_view name, std::vector<const XmlElement*>* out) {
  for (const XmlElement& c : e.children) {
    if (c.name == name) out->push_back(&c);
    Collect(c, name, out);
  }
}

}  // namespace

const XmlElement* XmlElement::Child(std::string_view wanted) const {
  for (const XmlElement& c : children)
    if (c.name == wanted) return &c;
  return nullptr;
}

const XmlElement* XmlElement::Find(std::string_view wanted) const {
  if (name == wanted) return this;
  for (const XmlElement& c : children)
    if (const XmlElement* found = c.Find(wanted)) return found;
  return nullptr;
}

void XmlElement::FindAll(std::string_view wanted, std::vector<const XmlElement*>* out) const {
  if (name == wanted) out->push_back(this);
  Collect(*this, wanted, out);
}

Result<XmlElement> ParseXml(std::string_view xml) {
  if (xml.size() > kMaxXmlBytes)
    return Status::InvalidArgument("XML reply of " + std::to_string(xml.size()) + " bytes (at most " +
                                   std::to_string(kMaxXmlBytes) + ")");
  std::unique_ptr<XML_ParserStruct, ParserDeleter> parser(XML_ParserCreate(nullptr));
  if (!parser) return Status::Internal("XML_ParserCreate failed");
  Builder b;
  b.parser = parser.get();
  XML_SetUserData(parser.get(), &b);
  XML_SetElementHandler(parser.get(), OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser.get(), OnText);
  XML_SetStartDoctypeDeclHandler(parser.get(), OnDoctype);
  // Never fetch external entities or DTDs.
  XML_SetParamEntityParsing(parser.get(), XML_PARAM_ENTITY_PARSING_NEVER);
  XML_Status st = XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE);
  if (st != XML_STATUS_OK || !b.error.empty()) {
    std::string why = !b.error.empty() ? b.error : XML_ErrorString(XML_GetErrorCode(parser.get()));
    return Status::InvalidArgument("malformed XML reply (line " +
                                   std::to_string(XML_GetCurrentLineNumber(parser.get())) + "): " + why);
  }
  if (!b.have_root) return Status::InvalidArgument("malformed XML reply: no element");
  return std::move(b.root);
}

std::optional<std::string> XmlField(std::string_view xml, std::string_view name) {
  Result<XmlElement> doc = ParseXml(xml);
  if (!doc.ok()) return std::nullopt;
  const XmlElement* e = doc->Find(name);
  if (!e) return std::nullopt;
  return e->text;
}

std::vector<std::string> XmlFields(std::string_view xml, std::string_view name) {
  std::vector<std::string> out;
  Result<XmlElement> doc = ParseXml(xml);
  if (!doc.ok()) return out;
  std::vector<const XmlElement*> found;
  doc->FindAll(name, &found);
  for (const XmlElement* e : found) out.push_back(e->text);
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::optional<S3Error> ParseError(std::string_view xml) {
  if (xml.find("Error") == std::string_view::npos) return std::nullopt;  // cheap test for success bodies
  Result<XmlElement> doc = ParseXml(xml);
  if (!doc.ok()) return std::nullopt;
  const XmlElement* error = nullptr;
  if (doc->name == "Error") error = &*doc;
  else if (doc->name == "ErrorResponse") error = doc->Child("Error");
  if (!error) return std::nullopt;
  S3Error e;
  if (const XmlElement* code = error->Child("Code")) e.code = code->text;
  if (const XmlElement* message = error->Child("Message")) e.message = message->text;
  return e;
}

}  // namespace vramflow::s3
