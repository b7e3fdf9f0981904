// SPDX-License-Identifier: MIT
// KFD's CRIU operations (AMDKFD_IOC_CRIU_OP) behind a small interface, so the
// plugin's dump and restore logic runs unchanged against the real /dev/kfd
// or a simulated KFD (tests and the CRIU host harness).
//
// The sequence KFD expects:
//   dump:    ProcessInfo (pauses the process: queues evicted) -> Checkpoint
//            (buckets, private data, a dma-buf fd per VRAM/GTT BO) -> ...
//            copy contents ... -> Unpause
//   restore: Restore (BOs recreated at their VAs, new mmap offsets, a
//            dma-buf fd per VRAM/GTT BO) -> ... fill contents, CRIU maps the
//            VMAs ... -> Resume
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

struct kfd_ioctl_criu_args;

namespace vramflow {

// Allocation flags KFD reports per BO (the kernel's KFD_IOC_ALLOC_MEM_FLAGS_*).
inline constexpr uint32_t kKfdBoVram = 1u << 0;
inline constexpr uint32_t kKfdBoGtt = 1u << 1;
inline constexpr uint32_t kKfdBoUserptr = 1u << 2;
inline constexpr uint32_t kKfdBoDoorbell = 1u << 3;
inline constexpr uint32_t kKfdBoMmioRemap = 1u << 4;
// Only VRAM and GTT BOs have contents to save (and dma-buf fds).
inline bool KfdBoHasContents(uint32_t alloc_flags) { return alloc_flags & (kKfdBoVram | kKfdBoGtt); }

inline constexpr int kKfdNoFd = -1;  // KFD_INVALID_FD as the plugin sees it

struct KfdDevice {
  uint32_t user_gpu_id = 0;    // the gpu_id the process knows (from the image on restore)
  uint32_t actual_gpu_id = 0;  // the GPU it is on
  int drm_fd = kKfdNoFd;       // restore: the target GPU's render node
};

struct KfdBo {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t offset = 0;           // mmap offset at dump time
  uint64_t restored_offset = 0;  // mmap offset after restore
  uint32_t gpu_id = 0;           // user gpu_id
  uint32_t alloc_flags = 0;
  int dmabuf_fd = kKfdNoFd;  // VRAM/GTT BOs: a dma-buf fd owned by the caller
};

struct KfdProcessInfo {
  uint32_t pid = 0;  // the process's pid, as KFD reports it (in the process's pid namespace)
  uint32_t num_devices = 0;
  uint32_t num_bos = 0;
  uint32_t num_objects = 0;
  uint64_t priv_data_size = 0;
};

// What Checkpoint returns and Restore takes.
struct KfdCheckpoint {
  std::vector<KfdDevice> devices;
  std::vector<KfdBo> bos;
  std::vector<uint8_t> priv_data;  // opaque to user space
  uint32_t num_objects = 0;
};

class KfdOps {
 public:
  virtual ~KfdOps() = default;
  // AMDKFD_IOC_GET_VERSION on a KFD fd of our own.
  virtual Status GetVersion(uint32_t* major, uint32_t* minor) = 0;
  // On `kfd_fd`, the target's KFD file (drained into the dumper).
  virtual Result<KfdProcessInfo> ProcessInfo(int kfd_fd, pid_t pid) = 0;
  virtual Result<KfdCheckpoint> Checkpoint(int kfd_fd, const KfdProcessInfo& info) = 0;
  virtual Status Unpause(int kfd_fd) = 0;
  // In the restored task, on its new KFD fd: fills restored_offset and
  // dmabuf_fd of every BO in `state`.
  virtual Status Restore(int kfd_fd, KfdCheckpoint* state) = 0;
  // From the main CRIU process, once every VMA is in place.
  virtual Status Resume(int kfd_fd, pid_t pid) = 0;
};

// The real thing: ioctls on /dev/kfd (`device`, for tests of the failure
// paths). Opening succeeds without a GPU; the operations then fail with the
// kernel's error.
std::unique_ptr<KfdOps> RealKfdOps(std::string device = "/dev/kfd");

// The ioctl call RealKfdOps makes (::ioctl unless told otherwise): a seam for
// tests, which check what would reach the kernel. Returns -1 and sets errno
// on failure, as ioctl(2) does.
using KfdIoctlFn = std::function<int(int fd, unsigned long request, void* arg)>;
std::unique_ptr<KfdOps> RealKfdOps(std::string device, KfdIoctlFn ioctl);

// The KFD interface version vramflow needs: 1.8 ("SDMA transfers with GTT
// BOs": dma-buf export of GTT BOs).
inline constexpr uint32_t kKfdMinMajor = 1;
inline constexpr uint32_t kKfdMinMinor = 8;
Status CheckKfdVersion(uint32_t major, uint32_t minor);

// Argument packing, exposed for tests: the kernel reads the arrays that the
// args point to, so these must match the UAPI exactly. For CHECKPOINT and
// RESTORE every array pointer (devices, bos, priv_data) is non-NULL even when
// its count or size is 0: KFD answers EINVAL to a NULL one.
struct KfdCriuBuffers {
  std::vector<uint8_t> devices;  // num_devices x kfd_criu_device_bucket
  std::vector<uint8_t> bos;      // num_bos x kfd_criu_bo_bucket
};
void PackCriuArgs(uint32_t op, uint32_t pid, KfdCriuBuffers* buffers, std::vector<uint8_t>* priv_data,
                  uint32_t num_devices, uint32_t num_bos, uint32_t num_objects, kfd_ioctl_criu_args* args);
void EncodeDeviceBuckets(const std::vector<KfdDevice>& devices, std::vector<uint8_t>* out);
void EncodeBoBuckets(const std::vector<KfdBo>& bos, std::vector<uint8_t>* out);
std::vector<KfdDevice> DecodeDeviceBuckets(const std::vector<uint8_t>& bytes, uint32_t count);
std::vector<KfdBo> DecodeBoBuckets(const std::vector<uint8_t>& bytes, uint32_t count);

}  // namespace vramflow
