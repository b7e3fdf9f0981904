#include "common/printable.h"

#include <cstdio>

namespace vramflow {

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out + "'";
}

}  // namespace vramflow
