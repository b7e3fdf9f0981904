// SPDX-License-Identifier: MIT
#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace vramflow {

Result<uint64_t> ParseSize(std::string_view text) {
  std::string s(text);
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) ++pos;
  if (pos == 0) return Status::InvalidArgument("size '" + s + "' does not start with a number");
  double number = 0;
  try {
    number = std::stod(s.substr(0, pos));
  } catch (...) {
    return Status::InvalidArgument("size '" + s + "' is not a number");
  }
  std::string suffix;
  for (size_t i = pos; i < s.size(); ++i) suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  double multiplier = 0;
  if (suffix.empty() || suffix == "b") multiplier = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") multiplier = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") multiplier = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") multiplier = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") multiplier = 1024.0 * 1024 * 1024 * 1024;
  else return Status::InvalidArgument("size '" + s + "' has an unknown suffix '" + suffix + "' (use K, M, G or T)");
  double bytes = number * multiplier;
  if (!(bytes >= 0) || bytes > static_cast<double>(std::numeric_limits<uint64_t>::max() / 2))
    return Status::InvalidArgument("size '" + s + "' is out of range");
  if (bytes != std::floor(bytes)) return Status::InvalidArgument("size '" + s + "' is not a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof(buf), "%.2f %s", v, kUnits[unit]);
  return buf;
}

std::string Hex(uint64_t v) {
  char buf[16];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  return "0x" + std::string(buf, end);
}

}  // namespace vramflow
