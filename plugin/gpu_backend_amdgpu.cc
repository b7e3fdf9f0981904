// The real machine behind GpuBackend: /dev/kfd, KFD's sysfs topology,
// /dev/dri/renderD* and libdrm_amdgpu SDMA devices.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "plugin/amdgpu_device.h"
#include "plugin/gpu_backend.h"

namespace vramflow {
namespace {

constexpr unsigned kDrmMajor = 226;  // DRM character devices; render nodes are minors 128..255

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
};

}  // namespace

std::unique_ptr<GpuBackend> OpenAmdgpuBackend(std::string topology_root, std::string kfd_path) {
  return std::make_unique<AmdgpuBackend>(std::move(topology_root), std::move(kfd_path));
}

}  // namespace vramflow
