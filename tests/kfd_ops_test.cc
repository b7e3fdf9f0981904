// SPDX-License-Identifier: MIT
// The KFD CRIU ioctl layer without a GPU: argument packing and bucket
// layouts checked byte for byte against the kernel UAPI, version checks, and
// the real ioctls failing cleanly where there is no KFD.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/kfd_ioctl.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/unique_fd.h"
#include "plugin/kfd/kfd_ops.h"

namespace vramflow {
namespace {

TEST(KfdOps, IoctlNumberIsTheKernels) {
  // _IOWR('K', 0x22, 56-byte struct): dir 3 (read|write) << 30, size << 16, type << 8, nr.
  EXPECT_EQ(static_cast<unsigned long>(AMDKFD_IOC_CRIU_OP), (3ul << 30) | (56ul << 16) | ('K' << 8) | 0x22);
}

TEST(KfdOps, PackCriuArgsPointsAtTheBuffers) {
  KfdCriuBuffers buffers;
  buffers.devices.resize(2 * 16);
  buffers.bos.resize(3 * 48);
  std::vector<uint8_t> priv(1234);
  kfd_ioctl_criu_args args;
  std::memset(&args, 0xAB, sizeof(args));
  PackCriuArgs(KFD_CRIU_OP_RESTORE, 77, &buffers, &priv, 2, 3, 9, &args);
  EXPECT_EQ(args.op, static_cast<uint32_t>(KFD_CRIU_OP_RESTORE));
  EXPECT_EQ(args.pid, 77u);
  EXPECT_EQ(args.num_devices, 2u);
  EXPECT_EQ(args.num_bos, 3u);
  EXPECT_EQ(args.num_objects, 9u);
  EXPECT_EQ(args.devices, reinterpret_cast<uintptr_t>(buffers.devices.data()));
  EXPECT_EQ(args.bos, reinterpret_cast<uintptr_t>(buffers.bos.data()));
  EXPECT_EQ(args.priv_data, reinterpret_cast<uintptr_t>(priv.data()));
  EXPECT_EQ(args.priv_data_size, 1234u);

  PackCriuArgs(KFD_CRIU_OP_PROCESS_INFO, 5, &buffers, nullptr, 0, 0, 0, &args);
  EXPECT_EQ(args.devices, 0u);
  EXPECT_EQ(args.bos, 0u);
  EXPECT_EQ(args.priv_data, 0u);
  EXPECT_EQ(args.priv_data_size, 0u);
  EXPECT_EQ(args.pid, 5u);
  EXPECT_EQ(args.op, static_cast<uint32_t>(KFD_CRIU_OP_PROCESS_INFO));
}

TEST(KfdOps, BoBucketLayoutMatchesTheUapi) {
  KfdBo bo;
  bo.addr = 0x0000'7f12'3456'7000;
  bo.size = 0x2'0000'0000;  // 8 GiB: needs all 64 bits
  bo.offset = 0x1122'3344'5566'7788;
  bo.restored_offset = 0x99;
  bo.gpu_id = 0xbeef;
  bo.alloc_flags = kKfdBoVram | (1u << 31);
  bo.dmabuf_fd = 42;
  std::vector<uint8_t> bytes;
  EncodeBoBuckets({KfdBo{}, bo}, &bytes);
  ASSERT_EQ(bytes.size(), 96u);
  const uint8_t* b = bytes.data() + 48;
  EXPECT_EQ(LoadLE64(b + 0), bo.addr);
  EXPECT_EQ(LoadLE64(b + 8), bo.size);
  EXPECT_EQ(LoadLE64(b + 16), bo.offset);
  EXPECT_EQ(LoadLE64(b + 24), bo.restored_offset);
  EXPECT_EQ(LoadLE32(b + 32), bo.gpu_id);
  EXPECT_EQ(LoadLE32(b + 36), bo.alloc_flags);
  EXPECT_EQ(LoadLE32(b + 40), 42u);
  EXPECT_EQ(LoadLE32(b + 44), 0u);  // pad

  std::vector<KfdBo> back = DecodeBoBuckets(bytes, 2);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].addr, bo.addr);
  EXPECT_EQ(back[1].size, bo.size);
  EXPECT_EQ(back[1].dmabuf_fd, 42);
  EXPECT_EQ(back[1].alloc_flags, bo.alloc_flags);
}

TEST(KfdOps, InvalidFdFromTheKernelIsMinusOne) {
  std::vector<uint8_t> bytes(48, 0);
  StoreLE32(bytes.data() + 40, KFD_INVALID_FD);
  std::vector<KfdBo> bos = DecodeBoBuckets(bytes, 1);
  ASSERT_EQ(bos.size(), 1u);
  EXPECT_EQ(bos[0].dmabuf_fd, kKfdNoFd);
}

TEST(KfdOps, DeviceBucketLayoutMatchesTheUapi) {
  std::vector<uint8_t> bytes;
  EncodeDeviceBuckets({KfdDevice{0x1111, 0x2222, 7}, KfdDevice{0x3333, 0x4444, kKfdNoFd}}, &bytes);
  ASSERT_EQ(bytes.size(), 32u);
  EXPECT_EQ(LoadLE32(bytes.data() + 0), 0x1111u);
  EXPECT_EQ(LoadLE32(bytes.data() + 4), 0x2222u);
  EXPECT_EQ(LoadLE32(bytes.data() + 8), 7u);
  EXPECT_EQ(LoadLE32(bytes.data() + 16), 0x3333u);
  EXPECT_EQ(LoadLE32(bytes.data() + 24), 0xffffffffu);
  std::vector<KfdDevice> back = DecodeDeviceBuckets(bytes, 2);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].actual_gpu_id, 0x4444u);
  EXPECT_EQ(back[1].drm_fd, kKfdNoFd);
}

TEST(KfdOps, DecodingStopsAtTheBufferEnd) {
  std::vector<uint8_t> bytes(48 + 10, 0);
  EXPECT_EQ(DecodeBoBuckets(bytes, 5).size(), 1u);
  EXPECT_EQ(DecodeDeviceBuckets(std::vector<uint8_t>(20), 3).size(), 1u);
}

TEST(KfdOps, VersionCheck) {
  EXPECT_TRUE(CheckKfdVersion(1, 8).ok());
  EXPECT_TRUE(CheckKfdVersion(1, 17).ok());
  Status old = CheckKfdVersion(1, 7);
  EXPECT_EQ(old.code(), Status::Code::kNotSupported);
  EXPECT_NE(old.message().find("1.7"), std::string::npos) << old.ToString();
  EXPECT_FALSE(CheckKfdVersion(2, 0).ok());
}

TEST(KfdOps, HasContentsOnlyForVramAndGtt) {
  EXPECT_TRUE(KfdBoHasContents(kKfdBoVram));
  EXPECT_TRUE(KfdBoHasContents(kKfdBoGtt | (1u << 31)));
  EXPECT_FALSE(KfdBoHasContents(kKfdBoUserptr));
  EXPECT_FALSE(KfdBoHasContents(kKfdBoDoorbell | kKfdBoMmioRemap));
}

TEST(KfdOps, RealIoctlsFailCleanlyWithoutKfd) {
  std::unique_ptr<KfdOps> missing = RealKfdOps("/nonexistent/kfd");
  uint32_t major = 0, minor = 0;
  Status s = missing->GetVersion(&major, &minor);
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_NE(s.message().find("/nonexistent/kfd"), std::string::npos) << s.ToString();

  // /dev/null is not KFD: every CRIU op is refused by the kernel (ENOTTY).
  UniqueFd null_fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(null_fd.valid());
  std::unique_ptr<KfdOps> kfd = RealKfdOps("/dev/null");
  Result<KfdProcessInfo> info = kfd->ProcessInfo(null_fd.get(), ::getpid());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("PROCESS_INFO"), std::string::npos) << info.status().ToString();
  Status unpause = kfd->Unpause(null_fd.get());
  EXPECT_NE(unpause.message().find("UNPAUSE"), std::string::npos) << unpause.ToString();
  KfdCheckpoint state;
  state.bos.push_back(KfdBo{});
  EXPECT_FALSE(kfd->Restore(null_fd.get(), &state).ok());
  EXPECT_FALSE(kfd->Resume(null_fd.get(), ::getpid()).ok());
  EXPECT_FALSE(kfd->GetVersion(&major, &minor).ok());
}

}  // namespace
}  // namespace vramflow
