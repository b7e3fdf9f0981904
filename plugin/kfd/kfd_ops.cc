// SPDX-License-Identifier: MIT
#include "plugin/kfd/kfd_ops.h"

#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace vramflow {

// The UAPI layout this file packs (linux/kfd_ioctl.h, KFD 1.7+).
static_assert(sizeof(kfd_ioctl_criu_args) == 56);  // 4 x u64, 5 x u32, padded
static_assert(sizeof(kfd_criu_device_bucket) == 16);
static_assert(sizeof(kfd_criu_bo_bucket) == 48);
static_assert(KFD_IOC_ALLOC_MEM_FLAGS_VRAM == kKfdBoVram && KFD_IOC_ALLOC_MEM_FLAGS_GTT == kKfdBoGtt &&
              KFD_IOC_ALLOC_MEM_FLAGS_USERPTR == kKfdBoUserptr && KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL == kKfdBoDoorbell &&
              KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP == kKfdBoMmioRemap);

namespace {

// KFD may be interrupted while it evicts queues; retry like libhsakmt does.
int KfdIoctl(const KfdIoctlFn& ioctl, int fd, unsigned long request, void* arg) {
  int r;
  int tries = 0;
  do {
    r = ioctl(fd, request, arg);
  } while (r == -1 && (errno == EINTR || errno == EAGAIN) && ++tries < 200);
  return r;
}

int SystemIoctl(int fd, unsigned long request, void* arg) { return ::ioctl(fd, request, arg); }

// What an empty array of CHECKPOINT or RESTORE points at: KFD refuses a NULL
// pointer even with a count of 0 (upstream passes what xzalloc(0) returns),
// and with a count of 0 it reads and writes nothing here.
alignas(uint64_t) uint8_t g_empty_array[sizeof(uint64_t)];

uint64_t ArrayPointer(std::vector<uint8_t>* array) {
  return reinterpret_cast<uintptr_t>(array && !array->empty() ? array->data() : g_empty_array);
}

const char* OpName(uint32_t op) {
  switch (op) {
    case KFD_CRIU_OP_PROCESS_INFO:
      return "PROCESS_INFO";
    case KFD_CRIU_OP_CHECKPOINT:
      return "CHECKPOINT";
    case KFD_CRIU_OP_UNPAUSE:
      return "UNPAUSE";
    case KFD_CRIU_OP_RESTORE:
      return "RESTORE";
    case KFD_CRIU_OP_RESUME:
      return "RESUME";
  }
  return "unknown";
}

class RealKfd final : public KfdOps {
 public:
  RealKfd(std::string device, KfdIoctlFn ioctl) : device_(std::move(device)), ioctl_(std::move(ioctl)) {}

  Status GetVersion(uint32_t* major, uint32_t* minor) override {
    UniqueFd fd(::open(device_.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening " + device_, errno);
    kfd_ioctl_get_version_args args{};
    if (KfdIoctl(ioctl_, fd.get(), AMDKFD_IOC_GET_VERSION, &args) != 0)
      return Status::FromErrno("AMDKFD_IOC_GET_VERSION on " + device_, errno);
    *major = args.major_version;
    *minor = args.minor_version;
    return Status::Ok();
  }

  Result<KfdProcessInfo> ProcessInfo(int kfd_fd, pid_t pid) override {
    kfd_ioctl_criu_args args{};
    KfdCriuBuffers buffers;
    PackCriuArgs(KFD_CRIU_OP_PROCESS_INFO, static_cast<uint32_t>(pid), &buffers, nullptr, 0, 0, 0, &args);
    VF_RETURN_IF_ERROR(Op(kfd_fd, &args));
    KfdProcessInfo info;
    info.pid = args.pid;
    info.num_devices = args.num_devices;
    info.num_bos = args.num_bos;
    info.num_objects = args.num_objects;
    info.priv_data_size = args.priv_data_size;
    return info;
  }

  Result<KfdCheckpoint> Checkpoint(int kfd_fd, const KfdProcessInfo& info) override {
    KfdCriuBuffers buffers;
    buffers.devices.resize(sizeof(kfd_criu_device_bucket) * info.num_devices);
    buffers.bos.resize(sizeof(kfd_criu_bo_bucket) * info.num_bos);
    std::vector<uint8_t> priv(info.priv_data_size);
    kfd_ioctl_criu_args args{};
    PackCriuArgs(KFD_CRIU_OP_CHECKPOINT, 0, &buffers, &priv, info.num_devices, info.num_bos, info.num_objects, &args);
    VF_RETURN_IF_ERROR(Op(kfd_fd, &args));
    KfdCheckpoint out;
    out.devices = DecodeDeviceBuckets(buffers.devices, info.num_devices);
    out.bos = DecodeBoBuckets(buffers.bos, info.num_bos);
    out.priv_data = std::move(priv);
    out.num_objects = info.num_objects;
    return out;
  }

  Status Unpause(int kfd_fd) override {
    kfd_ioctl_criu_args args{};
    KfdCriuBuffers buffers;
    PackCriuArgs(KFD_CRIU_OP_UNPAUSE, 0, &buffers, nullptr, 0, 0, 0, &args);
    return Op(kfd_fd, &args);
  }

  Status Restore(int kfd_fd, KfdCheckpoint* state) override {
    KfdCriuBuffers buffers;
    EncodeDeviceBuckets(state->devices, &buffers.devices);
    EncodeBoBuckets(state->bos, &buffers.bos);
    kfd_ioctl_criu_args args{};
    PackCriuArgs(KFD_CRIU_OP_RESTORE, 0, &buffers, &state->priv_data, static_cast<uint32_t>(state->devices.size()),
                 static_cast<uint32_t>(state->bos.size()), state->num_objects, &args);
    VF_RETURN_IF_ERROR(Op(kfd_fd, &args));
    std::vector<KfdBo> restored = DecodeBoBuckets(buffers.bos, static_cast<uint32_t>(state->bos.size()));
    for (size_t i = 0; i < restored.size(); ++i) {
      state->bos[i].restored_offset = restored[i].restored_offset;
      state->bos[i].dmabuf_fd = restored[i].dmabuf_fd;
    }
    return Status::Ok();
  }

  Status Resume(int kfd_fd, pid_t pid) override {
    kfd_ioctl_criu_args args{};
    KfdCriuBuffers buffers;
    PackCriuArgs(KFD_CRIU_OP_RESUME, static_cast<uint32_t>(pid), &buffers, nullptr, 0, 0, 0, &args);
    return Op(kfd_fd, &args);
  }

 private:
  Status Op(int kfd_fd, kfd_ioctl_criu_args* args) {
    if (KfdIoctl(ioctl_, kfd_fd, AMDKFD_IOC_CRIU_OP, args) != 0)
      return Status::FromErrno(
          std::string("KFD CRIU op ") + OpName(args->op) + " (pid " + std::to_string(args->pid) + ")", errno);
    return Status::Ok();
  }

  std::string device_;
  KfdIoctlFn ioctl_;
};

}  // namespace

std::unique_ptr<KfdOps> RealKfdOps(std::string device) { return RealKfdOps(std::move(device), SystemIoctl); }

std::unique_ptr<KfdOps> RealKfdOps(std::string device, KfdIoctlFn ioctl) {
  return std::make_unique<RealKfd>(std::move(device), std::move(ioctl));
}

Status CheckKfdVersion(uint32_t major, uint32_t minor) {
  if (major != kKfdMinMajor || minor < kKfdMinMinor)
    return Status::NotSupported("KFD interface " + std::to_string(major) + "." + std::to_string(minor) +
                                " lacks what checkpointing needs (1." + std::to_string(kKfdMinMinor) +
                                " or later: CRIU ops and dma-buf export of GTT BOs); update the kernel");
  return Status::Ok();
}

void PackCriuArgs(uint32_t op, uint32_t pid, KfdCriuBuffers* buffers, std::vector<uint8_t>* priv_data,
                  uint32_t num_devices, uint32_t num_bos, uint32_t num_objects, kfd_ioctl_criu_args* args) {
  std::memset(args, 0, sizeof(*args));
  args->op = op;
  args->pid = pid;
  args->num_devices = num_devices;
  args->num_bos = num_bos;
  args->num_objects = num_objects;
  // PROCESS_INFO, UNPAUSE and RESUME exchange no arrays: their pointers stay 0.
  if (op != KFD_CRIU_OP_CHECKPOINT && op != KFD_CRIU_OP_RESTORE) return;
  args->devices = ArrayPointer(&buffers->devices);
  args->bos = ArrayPointer(&buffers->bos);
  args->priv_data = ArrayPointer(priv_data);
  args->priv_data_size = priv_data ? priv_data->size() : 0;
}

void EncodeDeviceBuckets(const std::vector<KfdDevice>& devices, std::vector<uint8_t>* out) {
  out->assign(devices.size() * sizeof(kfd_criu_device_bucket), 0);
  for (size_t i = 0; i < devices.size(); ++i) {
    kfd_criu_device_bucket b{};
    b.user_gpu_id = devices[i].user_gpu_id;
    b.actual_gpu_id = devices[i].actual_gpu_id;
    b.drm_fd = static_cast<uint32_t>(devices[i].drm_fd);
    std::memcpy(out->data() + i * sizeof(b), &b, sizeof(b));
  }
}

void EncodeBoBuckets(const std::vector<KfdBo>& bos, std::vector<uint8_t>* out) {
  out->assign(bos.size() * sizeof(kfd_criu_bo_bucket), 0);
  for (size_t i = 0; i < bos.size(); ++i) {
    kfd_criu_bo_bucket b{};
    b.addr = bos[i].addr;
    b.size = bos[i].size;
    b.offset = bos[i].offset;
    b.restored_offset = bos[i].restored_offset;
    b.gpu_id = bos[i].gpu_id;
    b.alloc_flags = bos[i].alloc_flags;
    b.dmabuf_fd = static_cast<uint32_t>(bos[i].dmabuf_fd);
    std::memcpy(out->data() + i * sizeof(b), &b, sizeof(b));
  }
}

std::vector<KfdDevice> DecodeDeviceBuckets(const std::vector<uint8_t>& bytes, uint32_t count) {
  std::vector<KfdDevice> out;
  for (uint32_t i = 0; i < count && (i + 1) * sizeof(kfd_criu_device_bucket) <= bytes.size(); ++i) {
    kfd_criu_device_bucket b;
    std::memcpy(&b, bytes.data() + i * sizeof(b), sizeof(b));
    out.push_back(KfdDevice{b.user_gpu_id, b.actual_gpu_id, static_cast<int>(b.drm_fd)});
  }
  return out;
}

std::vector<KfdBo> DecodeBoBuckets(const std::vector<uint8_t>& bytes, uint32_t count) {
  std::vector<KfdBo> out;
  for (uint32_t i = 0; i < count && (i + 1) * sizeof(kfd_criu_bo_bucket) <= bytes.size(); ++i) {
    kfd_criu_bo_bucket b;
    std::memcpy(&b, bytes.data() + i * sizeof(b), sizeof(b));
    KfdBo bo;
    bo.addr = b.addr;
    bo.size = b.size;
    bo.offset = b.offset;
    bo.restored_offset = b.restored_offset;
    bo.gpu_id = b.gpu_id;
    bo.alloc_flags = b.alloc_flags;
    bo.dmabuf_fd = static_cast<int>(b.dmabuf_fd);  // KFD_INVALID_FD (0xffffffff) becomes -1
    out.push_back(bo);
  }
  return out;
}

}  // namespace vramflow
