// SPDX-License-Identifier: MIT
// The real machine behind GpuBackend: /dev/kfd, KFD's sysfs topology,
// /dev/dri/renderD* and libdrm_amdgpu SDMA devices.
#include <fcntl.h>
#include <libdrm/drm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "plugin/amdgpu/amdgpu_device.h"
#include "plugin/kfd/gpu_backend.h"

namespace vramflow {
namespace {

constexpr unsigned kDrmMajor = 226;  // DRM character devices; render nodes are minors 128..255

// AMDGPU_GEM_LIST_HANDLES (include/uapi/drm/amdgpu_drm.h; newer than
// Debian 12's libdrm headers, so declared here as the kernel does).
constexpr unsigned kDrmAmdgpuGemListHandles = 0x19;
constexpr uint32_t kGemListHandlesFlagIsImport = 1u << 0;
struct GemListHandles {
  uint64_t entries = 0;      // user pointer to GemListHandlesEntry[num_entries]
  uint32_t num_entries = 0;  // in: room; out: the file's handle count (retry when larger)
  uint32_t padding = 0;
};
struct GemListHandlesEntry {
  uint32_t gem_handle;
  uint32_t flags;
  uint64_t size;
  uint64_t preferred_domains;
  uint64_t alloc_flags;
  uint64_t alignment;
};
static_assert(sizeof(GemListHandles) == 16 && sizeof(GemListHandlesEntry) == 40);
constexpr unsigned long kIoctlGemListHandles = DRM_IOWR(DRM_COMMAND_BASE + kDrmAmdgpuGemListHandles, GemListHandles);

// A DRM ioctl, retried on EINTR/EAGAIN as libdrm's drmIoctl does.
int DrmIoctl(int fd, unsigned long request, void* arg) {
  int ret;
  do {
    ret = ::ioctl(fd, request, arg);
  } while (ret == -1 && (errno == EINTR || errno == EAGAIN));
  return ret;
}

class AmdgpuBackend final : public GpuBackend {
 public:
  AmdgpuBackend(std::string topology_root, std::string kfd_path)
      : topology_root_(std::move(topology_root)), kfd_path_(std::move(kfd_path)), ops_(RealKfdOps(kfd_path_)) {}

  std::string Describe() const override { return "amdgpu (" + kfd_path_ + ")"; }

  Result<GpuFileKind> Classify(const struct stat& st) override {
    if (!S_ISCHR(st.st_mode)) return GpuFileKind::kNone;
    if (major(st.st_rdev) == kDrmMajor && minor(st.st_rdev) >= 128 && minor(st.st_rdev) <= 255)
      return GpuFileKind::kRenderNode;
    struct stat kfd;
    if (::stat(kfd_path_.c_str(), &kfd) == 0 && S_ISCHR(kfd.st_mode) && major(kfd.st_rdev) == major(st.st_rdev))
      return GpuFileKind::kKfd;
    return GpuFileKind::kNone;
  }

  Result<uint32_t> RenderNodeGpuId(const struct stat& st) override {
    VF_ASSIGN_OR_RETURN(Topology topology, LocalTopology());
    for (const KfdNode* gpu : topology.gpus())
      if (gpu->drm_render_minor == minor(st.st_rdev)) return gpu->gpu_id;
    return Status::InvalidArgument("render node minor " + std::to_string(minor(st.st_rdev)) +
                                   " belongs to no GPU of KFD's topology under " + topology_root_);
  }

  KfdOps& Kfd() override { return *ops_; }

  Result<UniqueFd> OpenKfd() override { return OpenDeviceFile(kfd_path_); }

  Result<Topology> LocalTopology() override { return ParseTopology(topology_root_); }

  Result<UniqueFd> OpenRenderNode(const KfdNode& gpu) override { return OpenDeviceFile(RenderNodePath(gpu)); }

  std::string RenderNodePath(const KfdNode& gpu) const override {
    return "/dev/dri/renderD" + std::to_string(gpu.drm_render_minor);
  }

  Result<uint32_t> GemHandle(const KfdNode& gpu, int dmabuf_fd) override {
    std::lock_guard lock(mu_);
    UniqueFd& drm = own_render_fds_[gpu.gpu_id];
    if (!drm.valid()) {
      VF_ASSIGN_OR_RETURN(drm, OpenDeviceFile(RenderNodePath(gpu)));
    }
    struct drm_prime_handle prime = {};
    prime.fd = dmabuf_fd;
    if (DrmIoctl(drm.get(), DRM_IOCTL_PRIME_FD_TO_HANDLE, &prime) != 0)
      return Status::FromErrno("importing a dma-buf into " + RenderNodePath(gpu) + " (PRIME_FD_TO_HANDLE)", errno);
    return prime.handle;
  }

  Result<std::vector<DrmBo>> ListDrmBos(int render_fd) override {
    std::vector<GemListHandlesEntry> entries(8);
    for (;;) {
      GemListHandles args;
      args.entries = reinterpret_cast<uintptr_t>(entries.data());
      args.num_entries = static_cast<uint32_t>(entries.size());
      if (DrmIoctl(render_fd, kIoctlGemListHandles, &args) != 0) {
        if (errno == EINVAL || errno == ENOTTY)
          return Status::NotSupported(
              "this kernel has no AMDGPU_GEM_LIST_HANDLES, so a render node's DRM BOs "
              "cannot be listed");
        return Status::FromErrno("listing a render node's BOs (AMDGPU_GEM_LIST_HANDLES)", errno);
      }
      if (args.num_entries > entries.size()) {  // more handles than room: ask again with enough
        entries.resize(args.num_entries);
        continue;
      }
      std::vector<DrmBo> bos;
      for (uint32_t i = 0; i < args.num_entries; ++i)
        bos.push_back(
            DrmBo{entries[i].gem_handle, entries[i].size, (entries[i].flags & kGemListHandlesFlagIsImport) != 0});
      return bos;
    }
  }

  Result<std::unique_ptr<Device>> OpenDevice(const KfdNode& gpu) override {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<AmdgpuDevice> device, AmdgpuDevice::Open(RenderNodePath(gpu)));
    return std::unique_ptr<Device>(std::move(device));
  }

 private:
  static Result<UniqueFd> OpenDeviceFile(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening " + path, errno);
    return fd;
  }

  std::string topology_root_;
  std::string kfd_path_;
  std::unique_ptr<KfdOps> ops_;
  std::mutex mu_;
  std::map<uint32_t, UniqueFd> own_render_fds_;  // GUARDED_BY(mu_): gpu_id -> GemHandle's DRM file
};

}  // namespace

std::unique_ptr<GpuBackend> OpenAmdgpuBackend(std::string topology_root, std::string kfd_path) {
  return std::make_unique<AmdgpuBackend>(std::move(topology_root), std::move(kfd_path));
}

}  // namespace vramflow
