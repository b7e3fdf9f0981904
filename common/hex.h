// SPDX-License-Identifier: MIT
// Hex digits: the value of one, for the parsers of digests and keys written
// in hex (SHA-256 digests, S3 ETags, TLS pre-shared keys).
#pragma once

namespace vramflow {

// 0-15 for '0'-'9', 'a'-'f' and 'A'-'F'; -1 for anything else.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace vramflow
