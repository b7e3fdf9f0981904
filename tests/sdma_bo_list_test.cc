// SPDX-License-Identifier: MIT
// The BO list of one SDMA copy (plugin/amdgpu/sdma_packets.h, CopySubmissionBos):
// the kernel validates every BO of a submission's list, so a copy lists the
// IB buffer, its source and its destination, and nothing else of the device.
#include <gtest/gtest.h>

#include <vector>

#include "plugin/amdgpu/sdma_packets.h"

namespace vramflow {
namespace {

struct FakeBo {
  int id;
};

TEST(SdmaBoList, ListsTheIbTheSourceAndTheDestinationOnly) {
  // A device with many imported BOs and staging buffers: a copy between two
  // of them lists those two and the IB buffer.
  std::vector<FakeBo> device(64);
  for (int i = 0; i < 64; ++i) device[i].id = i;
  FakeBo ib{-1};
  const FakeBo* vram = &device[17];
  const FakeBo* staging = &device[40];
  std::vector<const FakeBo*> to_host = CopySubmissionBos<const FakeBo*>(&ib, vram, staging);
  EXPECT_EQ(to_host, (std::vector<const FakeBo*>{&ib, vram, staging}));
  std::vector<const FakeBo*> to_device = CopySubmissionBos<const FakeBo*>(&ib, staging, vram);
  EXPECT_EQ(to_device, (std::vector<const FakeBo*>{&ib, staging, vram}));
}

TEST(SdmaBoList, ListsABufferOnce) {
  // libdrm hands out one handle per BO: a dma-buf imported twice, or a copy
  // within one BO, names the same BO twice. The kernel wants it listed once.
  EXPECT_EQ(CopySubmissionBos(1, 2, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(CopySubmissionBos(1, 1, 3), (std::vector<int>{1, 3}));
  EXPECT_EQ(CopySubmissionBos(1, 3, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(CopySubmissionBos(7, 7, 7), (std::vector<int>{7}));
}

}  // namespace
}  // namespace vramflow
