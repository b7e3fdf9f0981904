// SPDX-License-Identifier: MIT
// GpuBackend: the machine as the CRIU plugin sees it — which files belong to
// KFD or a render node, KFD's CRIU operations, the local topology, render
// nodes, and DMA devices that copy BO contents.
//
// The plugin's dump and restore logic (plugin/criu_dump.h, criu_restore.h)
// talks only to this interface, so it runs unchanged on
//   - the real machine: /dev/kfd, /sys/class/kfd, /dev/dri/renderD*,
//     libdrm_amdgpu SDMA (OpenAmdgpuBackend below), and
//   - a simulated KFD served to every process of a test over a UNIX socket
//     (sim/kfd/sim_kfd_service.h), for the CRIU host harness and the tests.
//
// Thread safety: Kfd() ops and OpenDevice may be called from several
// threads; the rest from one thread at a time.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/kfd/kfd_ops.h"
#include "plugin/kfd/topology.h"
#include "streamer/device/device.h"

namespace vramflow {

enum class GpuFileKind {
  kNone,        // not ours: the plugin answers -ENOTSUP
  kKfd,         // /dev/kfd
  kRenderNode,  // /dev/dri/renderD<128..255>
};

// A BO a render-node file holds through DRM (GEM), as the kernel's
// AMDGPU_GEM_LIST_HANDLES lists it: allocated with GEM_CREATE (Mesa, OpenCL,
// Vulkan) or imported from a dma-buf. KFD's own BOs are not among them.
struct DrmBo {
  uint32_t handle = 0;  // in the render-node file it was listed from
  uint64_t size = 0;
  bool imported = false;  // from a dma-buf another driver or process exported
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // "amdgpu (/dev/kfd)", "simulated KFD at /tmp/x.sock", for messages.
  virtual std::string Describe() const = 0;

  // What the file behind a VMA or a drained fd is (fstat/stat of it).
  virtual Result<GpuFileKind> Classify(const struct stat& st) = 0;

  // The gpu_id of the GPU a render node (Classify: kRenderNode) belongs to.
  virtual Result<uint32_t> RenderNodeGpuId(const struct stat& st) {
    return Status::NotSupported(Describe() + " cannot tell render nodes' GPUs apart");
  }

  // KFD's CRIU operations.
  virtual KfdOps& Kfd() = 0;

  // A KFD file of the calling process (its own open("/dev/kfd")).
  virtual Result<UniqueFd> OpenKfd() = 0;

  // This machine's topology (real: /sys/class/kfd/kfd/topology or the root
  // the plugin was configured with).
  virtual Result<Topology> LocalTopology() = 0;

  // The render node of a local GPU, opened read-write, close-on-exec.
  virtual Result<UniqueFd> OpenRenderNode(const KfdNode& gpu) = 0;
  // Its path, as the restored process will see it ("/dev/dri/renderD128").
  virtual std::string RenderNodePath(const KfdNode& gpu) const = 0;

  // The GEM handle of a dma-buf's BO in the backend's own DRM file of `gpu`
  // (opened once, kept for the backend's lifetime), as upstream's
  // get_gem_handle: the same BO gives the same handle however many
  // processes or fds export it, which is how a BO shared between processes
  // is recognised. The DRM file keeps a reference to every BO it imported.
  virtual Result<uint32_t> GemHandle(const KfdNode& gpu, int dmabuf_fd) = 0;

  // The DRM BOs of a render-node file (`render_fd`, a process's open
  // renderD<minor>). NotSupported when the kernel has no
  // AMDGPU_GEM_LIST_HANDLES, so DRM BOs cannot be seen.
  virtual Result<std::vector<DrmBo>> ListDrmBos(int render_fd) = 0;

  // A DMA device on a local GPU; it imports the dma-buf fds KFD hands out
  // for that GPU's BOs (streamer/device/device.h).
  virtual Result<std::unique_ptr<Device>> OpenDevice(const KfdNode& gpu) = 0;
};

// The real machine. `topology_root` is where KFD's topology is read
// (kKfdTopologyRoot unless a test or the user points elsewhere); `kfd_path`
// is /dev/kfd.
std::unique_ptr<GpuBackend> OpenAmdgpuBackend(std::string topology_root = kKfdTopologyRoot,
                                              std::string kfd_path = "/dev/kfd");

}  // namespace vramflow
