// SPDX-License-Identifier: MIT
#include "streamer/format/amdgpu_pages.h"

#include <bit>
#include <cctype>

#include "common/endian.h"

namespace vramflow {

bool IsAmdgpuPagesFileName(std::string_view name) {
  constexpr std::string_view kPrefix = "amdgpu-pages-";
  constexpr std::string_view kSuffix = ".img";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return false;
  std::string_view middle = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  size_t dash = middle.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == middle.size()) return false;
  for (size_t i = 0; i < dash; ++i)
    if (!std::isdigit(static_cast<unsigned char>(middle[i]))) return false;
  for (size_t i = dash + 1; i < middle.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(middle[i]))) return false;
  return true;
}

bool HostIsLittleEndian() { return std::endian::native == std::endian::little; }

void EncodeAmdgpuPagesHeader(uint64_t content_size, bool little_endian, uint8_t out[kAmdgpuPagesHeaderSize]) {
  StoreLE64(out, little_endian ? content_size : ByteSwap(content_size));
}

uint64_t DecodeAmdgpuPagesHeader(const uint8_t in[kAmdgpuPagesHeaderSize], bool little_endian) {
  uint64_t v = LoadLE64(in);
  return little_endian ? v : ByteSwap(v);
}

}  // namespace vramflow
