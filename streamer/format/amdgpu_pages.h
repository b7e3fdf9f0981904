// SPDX-License-Identifier: MIT
// Legacy CRIU amdgpu BO-content images: amdgpu-pages-<id>-<gpuid>.img.
//
// Upstream's plugin writes an 8-byte native-endian size header followed by
// the raw bytes of every VRAM/GTT BO of one GPU. `pack` recognises such files
// and stores their content as an object tagged with the attributes below, so
// `unpack` can write the identical file again, header included.
#pragma once

#include <cstdint>
#include <string_view>

namespace vramflow {

inline constexpr size_t kAmdgpuPagesHeaderSize = 8;
inline constexpr char kLegacyFormatKey[] = "legacy-format";
inline constexpr char kLegacyFormatAmdgpuPages[] = "amdgpu-pages";
inline constexpr char kLegacyByteOrderKey[] = "legacy-byte-order";  // "le" or "be"

// True for "amdgpu-pages-<decimal id>-<hex gpu id>.img".
bool IsAmdgpuPagesFileName(std::string_view basename);

// The header as upstream writes it on this host (native byte order).
void EncodeAmdgpuPagesHeader(uint64_t content_size, bool little_endian, uint8_t out[kAmdgpuPagesHeaderSize]);
uint64_t DecodeAmdgpuPagesHeader(const uint8_t in[kAmdgpuPagesHeaderSize], bool little_endian);
bool HostIsLittleEndian();

}  // namespace vramflow
