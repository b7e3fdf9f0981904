#include "transport/s3_xml.h"

#include <cstdlib>

namespace vramflow::s3 {

std::optional<std::string> XmlField(std::string_view xml, std::string_view name) {
  std::string open = "<" + std::string(name);
  size_t pos = 0;
  for (;;) {
    pos = xml.find(open, pos);
    if (pos == std::string_view::npos) return std::nullopt;
    size_t after = pos + open.size();
    if (after >= xml.size()) return std::nullopt;
    char c = xml[after];
    if (c == '/' && after + 1 < xml.size() && xml[after + 1] == '>') return std::string();
    if (c == '>' || c == ' ') {
      size_t start = xml.find('>', after);
      if (start == std::string_view::npos) return std::nullopt;
      if (xml[start - 1] == '/') return std::string();
      ++start;
      size_t end = xml.find("</" + std::string(name) + ">", start);
      if (end == std::string_view::npos) return std::nullopt;
      return XmlUnescape(xml.substr(start, end - start));
    }
    pos = after;  // a longer name with this prefix (<ETagX>)
  }
}

std::vector<std::string> XmlFields(std::string_view xml, std::string_view name) {
  std::vector<std::string> out;
  std::string close = "</" + std::string(name) + ">";
  for (;;) {
    std::optional<std::string> field = XmlField(xml, name);
    if (!field) return out;
    out.push_back(std::move(*field));
    size_t end = xml.find(close);
    if (end == std::string_view::npos) return out;
    xml.remove_prefix(end + close.size());
  }
}

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    std::string_view entity = s.substr(i + 1, semi - i - 1);
    if (entity == "lt") out += '<';
    else if (entity == "gt") out += '>';
    else if (entity == "amp") out += '&';
    else if (entity == "quot") out += '"';
    else if (entity == "apos") out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      bool hex = entity[1] == 'x' || entity[1] == 'X';
      std::string digits(entity.substr(hex ? 2 : 1));
      unsigned long code = std::strtoul(digits.c_str(), nullptr, hex ? 16 : 10);
      if (code == 0 || code > 0x7f) {  // only ASCII is meaningful in the fields we read
        out += std::string(s.substr(i, semi - i + 1));
        i = semi;
        continue;
      }
      out += static_cast<char>(code);
    } else {
      out += std::string(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      default: out += c;
    }
  }
  return out;
}

std::optional<S3Error> ParseError(std::string_view xml) {
  size_t error = xml.find("<Error>");
  if (error == std::string_view::npos) return std::nullopt;
  std::string_view body = xml.substr(error);
  S3Error e;
  e.code = XmlField(body, "Code").value_or("");
  e.message = XmlField(body, "Message").value_or("");
  return e;
}

}  // namespace vramflow::s3
