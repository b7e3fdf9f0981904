// SPDX-License-Identifier: MIT
// SDMA command encoding for linear copies (COPY_LINEAR), the indirect
// buffers (IBs) that carry them, and the BO list a copy is submitted with.
//
// Pure functions, no hardware: what the amdgpu device backend submits, kept
// apart so it can be checked bit for bit without a GPU.
//
// COPY_LINEAR is 7 dwords: header (op 1 = COPY, sub-op 0 = LINEAR), byte
// count, endian-swap control (0), source VA low/high, destination VA
// low/high. The count convention differs by SDMA IP generation, as the
// kernel's sdma_v*_emit_copy_buffer() shows: SDMA 4.0 and later write
// bytes - 1 (count field up to 2^22 - 1), earlier generations write bytes
// (up to 2^21 - 1). IBs are padded with NOPs to a multiple of 8 dwords.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/status.h"

namespace vramflow {

inline constexpr uint32_t kSdmaOpNop = 0;
inline constexpr uint32_t kSdmaOpCopy = 1;
inline constexpr uint32_t kSdmaSubOpCopyLinear = 0;
inline constexpr uint32_t kCopyLinearDwords = 7;
inline constexpr uint32_t kIbAlignmentDwords = 8;

struct SdmaCopyConvention {
  uint32_t max_bytes_per_packet;  // never more than 2 MiB, the plugin's proven size
  bool count_is_bytes_minus_one;
};

// The convention for an SDMA IP of the given major version (from
// amdgpu_query_hw_ip_info(AMDGPU_HW_IP_DMA).hw_ip_version_major).
SdmaCopyConvention CopyConventionForSdmaMajor(uint32_t ip_major);

// Writes one COPY_LINEAR packet of `bytes` (1 .. max_bytes_per_packet).
void EncodeCopyLinear(uint64_t src_va, uint64_t dst_va, uint32_t bytes, const SdmaCopyConvention& convention,
                      uint32_t out[kCopyLinearDwords]);

// Number of dwords BuildCopyIb produces for `bytes`.
uint64_t CopyIbDwords(uint64_t bytes, const SdmaCopyConvention& convention);

// Replaces *ib with packets copying `bytes` from src_va to dst_va, split at
// max_bytes_per_packet, NOP-padded to a multiple of 8 dwords.
Status BuildCopyIb(uint64_t src_va, uint64_t dst_va, uint64_t bytes, const SdmaCopyConvention& convention,
                   std::vector<uint32_t>* ib);

// The BO list of one copy submission: the buffers the copy touches and no
// others, since the kernel validates (makes resident, fences) every BO of a
// submission's list: the IB buffer carrying the packets, then the source and
// the destination, each listed once (two handles may name one BO). `Handle`
// is amdgpu_bo_handle in the device backend; anything comparable in tests.
template <typename Handle>
std::vector<Handle> CopySubmissionBos(Handle ib, Handle source, Handle destination) {
  std::vector<Handle> bos{ib};
  for (Handle h : {source, destination}) {
    if (std::find(bos.begin(), bos.end(), h) == bos.end()) bos.push_back(h);
  }
  return bos;
}

}  // namespace vramflow
