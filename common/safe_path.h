// SPDX-License-Identifier: MIT
// Safe placement of untrusted object names under an output directory.
//
// Object names come from the stream, which may come from anyone. A name is
// accepted only as a relative path of plain components (no "", ".", "..",
// no NUL, no leading '/'); directories are created and entered one component
// at a time with O_NOFOLLOW, so neither ".." nor a planted symlink can lead
// outside the output directory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

// Splits and checks a name; the error says why it is refused.
Result<std::vector<std::string>> SplitSafeRelativePath(std::string_view name);

// Checks a name that a peer gave a whole file (a stream that `recv
// --output-dir` stores under its name): 1 to 200 bytes of A-Z a-z 0-9 . _ -,
// not starting with '.' or '-'. So it is one plain, visible file name in the
// directory: no '/', no "..", no hidden file, nothing a shell reads as an
// option, no control bytes, and room for a temporary suffix within NAME_MAX.
// The error quotes the name printably and says why.
Status CheckSafeFileName(std::string_view name);

// Opens (creating when `create`) the directory that will hold `components`'
// last element, under `root`. Returns its fd.
Result<UniqueFd> OpenParentDirectory(int root_fd, const std::vector<std::string>& components, bool create);

}  // namespace vramflow
