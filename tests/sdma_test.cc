// SPDX-License-Identifier: MIT
// SDMA packet and IB encoding, bit for bit; amdgpu backend discovery.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "plugin/amdgpu/amdgpu_device.h"
#include "plugin/amdgpu/sdma_packets.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

TEST(SdmaPacketsTest, CopyLinearOnSdma4AndLaterWritesBytesMinusOne) {
  SdmaCopyConvention c = CopyConventionForSdmaMajor(4);
  EXPECT_EQ(c.max_bytes_per_packet, 1u << 21);
  uint32_t p[kCopyLinearDwords];
  EncodeCopyLinear(0x0000123456789000ull, 0x00000abcdef01000ull, 4096, c, p);
  const uint32_t expected[] = {0x00000001, 4095, 0, 0x56789000, 0x00001234, 0xdef01000, 0x00000abc};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(p[i], expected[i]) << "dword " << i;
}

TEST(SdmaPacketsTest, CopyLinearBeforeSdma4WritesBytes) {
  SdmaCopyConvention c = CopyConventionForSdmaMajor(3);
  EXPECT_EQ(c.max_bytes_per_packet, (1u << 21) - 1);
  uint32_t p[kCopyLinearDwords];
  EncodeCopyLinear(0x1000, 0x2000, 100, c, p);
  EXPECT_EQ(p[0], 1u);
  EXPECT_EQ(p[1], 100u);
  EXPECT_EQ(p[3], 0x1000u);
  EXPECT_EQ(p[5], 0x2000u);
}

TEST(SdmaPacketsTest, IbSplitsAtTwoMibAndPadsWithNops) {
  SdmaCopyConvention c = CopyConventionForSdmaMajor(5);
  std::vector<uint32_t> ib;
  const uint64_t src = 0x100000000ull, dst = 0x200000000ull;
  const uint64_t bytes = (5ull << 20) + 3;  // 2 MiB + 2 MiB + 1 MiB + 3
  ASSERT_TRUE(BuildCopyIb(src, dst, bytes, c, &ib).ok());
  ASSERT_EQ(ib.size(), 24u);  // 3 packets = 21 dwords, padded to 24
  EXPECT_EQ(CopyIbDwords(bytes, c), 24u);
  const uint32_t counts[] = {(1u << 21) - 1, (1u << 21) - 1, (1u << 20) + 3 - 1};
  for (int k = 0; k < 3; ++k) {
    const uint32_t* p = ib.data() + 7 * k;
    uint64_t advanced = static_cast<uint64_t>(k) << 21;
    EXPECT_EQ(p[0], 1u);
    EXPECT_EQ(p[1], counts[k]) << "packet " << k;
    EXPECT_EQ(p[2], 0u);
    EXPECT_EQ(p[3] | uint64_t{p[4]} << 32, src + advanced);
    EXPECT_EQ(p[5] | uint64_t{p[6]} << 32, dst + advanced);
  }
  for (size_t i = 21; i < ib.size(); ++i) EXPECT_EQ(ib[i], 0u) << "padding dword " << i;
}

TEST(SdmaPacketsTest, OldEnginesUseOneByteShorterPackets) {
  SdmaCopyConvention c = CopyConventionForSdmaMajor(2);
  std::vector<uint32_t> ib;
  ASSERT_TRUE(BuildCopyIb(0, 0x10000000, 1u << 21, c, &ib).ok());
  ASSERT_EQ(ib.size(), 16u);  // two packets: 2 MiB - 1, then 1 byte
  EXPECT_EQ(ib[1], (1u << 21) - 1);
  EXPECT_EQ(ib[7 + 1], 1u);
  EXPECT_EQ(ib[7 + 3], (1u << 21) - 1);  // second packet starts where the first ended
}

TEST(SdmaPacketsTest, RejectsEmptyCopies) {
  std::vector<uint32_t> ib;
  EXPECT_FALSE(BuildCopyIb(0, 0, 0, CopyConventionForSdmaMajor(4), &ib).ok());
}

TEST(AmdgpuDeviceTest, OpeningAMissingRenderNodeSaysWhich) {
  Result<std::unique_ptr<AmdgpuDevice>> d = AmdgpuDevice::Open("/nonexistent/renderD999");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/nonexistent/renderD999"), std::string::npos);
}

TEST(AmdgpuDeviceTest, FindsOnlyAmdgpuRenderNodesInASysfsTree) {
  testing::TempDir root;
  auto mk = [&](const std::string& p) { ASSERT_EQ(0, ::mkdir((root.path() + p).c_str(), 0755)) << p; };
  mk("/class");
  mk("/class/drm");
  mk("/drivers");
  for (const char* node : {"renderD128", "renderD129", "card0"}) {
    mk(std::string("/class/drm/") + node);
    mk(std::string("/class/drm/") + node + "/device");
  }
  ASSERT_EQ(0, ::symlink("../../../../drivers/amdgpu", (root.path() + "/class/drm/renderD128/device/driver").c_str()));
  ASSERT_EQ(0, ::symlink("../../../../drivers/nvidia", (root.path() + "/class/drm/renderD129/device/driver").c_str()));
  ASSERT_EQ(0, ::symlink("../../../../drivers/amdgpu", (root.path() + "/class/drm/card0/device/driver").c_str()));
  std::vector<std::string> nodes = FindAmdgpuRenderNodes(root.path());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0], "/dev/dri/renderD128");
}

}  // namespace
}  // namespace vramflow
