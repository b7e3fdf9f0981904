// SPDX-License-Identifier: MIT
#include "plugin/amdgpu/sdma_packets.h"

#include <algorithm>
#include <string>

namespace vramflow {

SdmaCopyConvention CopyConventionForSdmaMajor(uint32_t ip_major) {
  if (ip_major >= 4) return SdmaCopyConvention{1u << 21, true};
  return SdmaCopyConvention{(1u << 21) - 1, false};
}

void EncodeCopyLinear(uint64_t src_va, uint64_t dst_va, uint32_t bytes, const SdmaCopyConvention& convention,
                      uint32_t out[kCopyLinearDwords]) {
  out[0] = (kSdmaSubOpCopyLinear << 8) | kSdmaOpCopy;
  out[1] = convention.count_is_bytes_minus_one ? bytes - 1 : bytes;
  out[2] = 0;  // no endian swap
  out[3] = static_cast<uint32_t>(src_va);
  out[4] = static_cast<uint32_t>(src_va >> 32);
  out[5] = static_cast<uint32_t>(dst_va);
  out[6] = static_cast<uint32_t>(dst_va >> 32);
}

uint64_t CopyIbDwords(uint64_t bytes, const SdmaCopyConvention& convention) {
  uint64_t packets = (bytes + convention.max_bytes_per_packet - 1) / convention.max_bytes_per_packet;
  uint64_t dwords = packets * kCopyLinearDwords;
  return (dwords + kIbAlignmentDwords - 1) / kIbAlignmentDwords * kIbAlignmentDwords;
}

Status BuildCopyIb(uint64_t src_va, uint64_t dst_va, uint64_t bytes, const SdmaCopyConvention& convention,
                   std::vector<uint32_t>* ib) {
  if (bytes == 0) return Status::InvalidArgument("SDMA copy of zero bytes");
  if (convention.max_bytes_per_packet == 0 || convention.max_bytes_per_packet > (1u << 21))
    return Status::InvalidArgument("SDMA packet size limit " + std::to_string(convention.max_bytes_per_packet) +
                                   " is outside 1 .. 2 MiB");
  ib->assign(CopyIbDwords(bytes, convention), kSdmaOpNop);
  uint32_t* out = ib->data();
  for (uint64_t done = 0; done < bytes;) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(bytes - done, convention.max_bytes_per_packet));
    EncodeCopyLinear(src_va + done, dst_va + done, n, convention, out);
    out += kCopyLinearDwords;
    done += n;
  }
  return Status::Ok();
}

}  // namespace vramflow
