// SPDX-License-Identifier: MIT
// Untrusted text (a name a peer sent, an object name from a stream) made safe
// to print, so that a hostile name can neither hide in a message nor drive
// the terminal (ESC sequences, CR, newlines).
//
//   Printable:   quoted, every byte that is not printable ASCII as \xNN; for
//                error messages.
//   EscapedText: unquoted, valid UTF-8 kept as it is, every control byte
//                (C0, DEL, C1), backslash and byte of invalid UTF-8 as \xNN
//                or \\; for reports that list names. Lossless: the text can
//                be read back from it.
//   IsValidUtf8: whether a JSON string can hold the bytes as they are.
//   HexBytes:    every byte as two lowercase hex digits.
#pragma once

#include <string>
#include <string_view>

namespace vramflow {

// 'text', with \, ' and non-printable bytes escaped; at most `max_bytes` of
// the text are shown (then "...").
std::string Printable(std::string_view text, size_t max_bytes = 256);

std::string EscapedText(std::string_view text);

bool IsValidUtf8(std::string_view text);

std::string HexBytes(std::string_view bytes);

}  // namespace vramflow
