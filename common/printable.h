// Untrusted text (a name a peer sent) made safe to print: quoted, with every
// byte that is not printable ASCII written as \xNN, so that a hostile name
// can neither hide in an error message nor drive the terminal.
#pragma once

#include <string>
#include <string_view>

namespace vramflow {

// 'text', with \, ' and non-printable bytes escaped; at most `max_bytes` of
// the text are shown (then "...").
std::string Printable(std::string_view text, size_t max_bytes = 256);

}  // namespace vramflow
