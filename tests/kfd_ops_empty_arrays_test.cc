// SPDX-License-Identifier: MIT
// KFD's CHECKPOINT and RESTORE refuse NULL devices, bos or priv_data
// pointers with EINVAL, whatever the counts (kfd_chardev.c, criu_checkpoint
// and criu_restore). A process with KFD open but no BOs has num_bos 0, and
// its dump must still pass a valid pointer, as upstream's does (xzalloc(0)).
// Checked through RealKfdOps' ioctl seam, against a stand-in for the kernel.
#include <gtest/gtest.h>
#include <linux/kfd_ioctl.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "plugin/kfd/kfd_ops.h"

namespace vramflow {
namespace {

// Answers AMDKFD_IOC_CRIU_OP as the kernel does where it matters here: a
// process with one GPU, `bos` BOs and 24 bytes of private data.
class FakeKfd {
 public:
  explicit FakeKfd(uint32_t bos) : bos_(bos) {}

  KfdIoctlFn Fn() {
    return [this](int, unsigned long request, void* arg) { return Ioctl(request, arg); };
  }
  std::vector<uint32_t> ops;  // every op asked for, in order

 private:
  static constexpr uint32_t kPrivBytes = 24;

  int Ioctl(unsigned long request, void* arg) {
    if (request != AMDKFD_IOC_CRIU_OP) return Fail(ENOTTY);
    auto* args = static_cast<kfd_ioctl_criu_args*>(arg);
    ops.push_back(args->op);
    switch (args->op) {
      case KFD_CRIU_OP_PROCESS_INFO:
        args->num_devices = 1;
        args->num_bos = bos_;
        args->num_objects = 0;
        args->priv_data_size = kPrivBytes;
        return 0;
      case KFD_CRIU_OP_CHECKPOINT: {
        if (!args->devices || !args->bos || !args->priv_data) return Fail(EINVAL);
        if (args->num_devices != 1 || args->num_bos != bos_ || args->priv_data_size != kPrivBytes) return Fail(EINVAL);
        kfd_criu_device_bucket device{};
        device.user_gpu_id = device.actual_gpu_id = 0x1234;
        std::memcpy(reinterpret_cast<void*>(args->devices), &device, sizeof(device));
        for (uint32_t i = 0; i < bos_; ++i) {
          kfd_criu_bo_bucket bo{};
          bo.addr = 0x10000 * (i + 1);
          bo.size = 4096;
          bo.gpu_id = 0x1234;
          bo.dmabuf_fd = KFD_INVALID_FD;
          std::memcpy(reinterpret_cast<uint8_t*>(args->bos) + i * sizeof(bo), &bo, sizeof(bo));
        }
        std::memset(reinterpret_cast<void*>(args->priv_data), 0x5a, kPrivBytes);
        return 0;
      }
      case KFD_CRIU_OP_RESTORE:
        if (!args->devices || !args->bos || !args->priv_data || !args->priv_data_size) return Fail(EINVAL);
        return 0;
      default:
        return 0;
    }
  }
  static int Fail(int err) {
    errno = err;
    return -1;
  }

  uint32_t bos_;
};

TEST(KfdOpsEmptyArrays, CheckpointWithoutBosPassesValidPointers) {
  FakeKfd kernel(/*bos=*/0);
  std::unique_ptr<KfdOps> kfd = RealKfdOps("/dev/kfd", kernel.Fn());
  Result<KfdProcessInfo> info = kfd->ProcessInfo(3, 100);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->num_bos, 0u);
  Result<KfdCheckpoint> cp = kfd->Checkpoint(3, *info);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_TRUE(cp->bos.empty());
  ASSERT_EQ(cp->devices.size(), 1u);
  EXPECT_EQ(cp->devices[0].user_gpu_id, 0x1234u);
  EXPECT_EQ(cp->priv_data, std::vector<uint8_t>(24, 0x5a));
  EXPECT_EQ(kernel.ops, (std::vector<uint32_t>{KFD_CRIU_OP_PROCESS_INFO, KFD_CRIU_OP_CHECKPOINT}));
}

TEST(KfdOpsEmptyArrays, CheckpointWithBosStillFillsThem) {
  FakeKfd kernel(/*bos=*/3);
  std::unique_ptr<KfdOps> kfd = RealKfdOps("/dev/kfd", kernel.Fn());
  Result<KfdProcessInfo> info = kfd->ProcessInfo(3, 100);
  ASSERT_TRUE(info.ok());
  Result<KfdCheckpoint> cp = kfd->Checkpoint(3, *info);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  ASSERT_EQ(cp->bos.size(), 3u);
  EXPECT_EQ(cp->bos[2].addr, 0x30000u);
  EXPECT_EQ(cp->bos[2].dmabuf_fd, kKfdNoFd);
}

TEST(KfdOpsEmptyArrays, RestoreWithoutBosPassesValidPointers) {
  FakeKfd kernel(/*bos=*/0);
  std::unique_ptr<KfdOps> kfd = RealKfdOps("/dev/kfd", kernel.Fn());
  KfdCheckpoint state;
  state.devices.push_back(KfdDevice{0x1234, 0x5678, 7});
  state.priv_data.assign(24, 0x5a);
  Status s = kfd->Restore(3, &state);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(KfdOpsEmptyArrays, PackedPointersAreNeverNullForCheckpointAndRestore) {
  for (uint32_t op : {KFD_CRIU_OP_CHECKPOINT, KFD_CRIU_OP_RESTORE}) {
    KfdCriuBuffers empty;
    std::vector<uint8_t> no_priv;
    kfd_ioctl_criu_args args;
    PackCriuArgs(op, 0, &empty, &no_priv, 0, 0, 0, &args);
    EXPECT_NE(args.devices, 0u) << op;
    EXPECT_NE(args.bos, 0u) << op;
    EXPECT_NE(args.priv_data, 0u) << op;
    EXPECT_EQ(args.priv_data_size, 0u) << op;
    EXPECT_EQ(args.num_bos, 0u) << op;
  }
}

}  // namespace
}  // namespace vramflow
