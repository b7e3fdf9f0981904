// SPDX-License-Identifier: MIT
// SimKfd: a simulated amdkfd — GPUs, processes with BOs, and KFD's CRIU
// operations — so the plugin's dump and restore logic runs without an AMD GPU.
//
// A SimKfd is one machine: N GPUs (gpu_id, render minor, topology
// properties) and simulated processes keyed by pid. A process has devices
// (user gpu_id -> actual gpu_id, as KFD keeps them per process), BOs (GPU VA,
// size, alloc flags, gpu, mmap offset; VRAM and GTT BOs hold their contents
// in a memfd) and opaque private data (queues, events) derived
// deterministically from its BO list, so Restore can tell corrupted private
// data from good.
//
// "KFD files" and "render nodes" are real fds (memfds) that the machine maps
// back to a pid or a GPU by inode, so they survive dup() and fd passing like
// the real ones. Ops() gives the KfdOps the plugin uses, with the kernel's
// order rules and errors (plugin/kfd/kfd_ops.h; /work/shared/context/
// criu-amdgpu.md 2.2 and 3.1):
//
//   ProcessInfo   pauses the process (queues evicted); ESRCH for no process,
//                 or for a pid argument that is neither 0 nor the fd's
//   Checkpoint    needs a paused process and ProcessInfo's counts (EINVAL);
//                 a new dma-buf fd (same memory) per VRAM/GTT BO
//   Unpause       needs a paused process (EINVAL)
//   Restore       on a KFD fd of a pid without KFD state: BOs recreated on the
//                 devices' actual GPUs, zero-filled, at new mmap offsets;
//                 private data checked against the buckets (EINVAL); each
//                 device keeps the DRM file its drm_fd named (RestoreDrmFile),
//                 as KFD does: mmap rights go with that file
//   Resume        needs a restored process (EINVAL); ESRCH for no process
//
// Errors are IoErrors with the errno the kernel would give ("simulated KFD
// Checkpoint: process 42 is not paused (...): Invalid argument"); an fd that
// is no KFD file gives EBADF or ENOTTY.
//
// Every call is logged by op name ("ProcessInfo", ...), failed ones too, and
// faults can be injected (SimKfdFaults).
//
// Thread-safety: every method may be called from any thread; one mutex
// guards the machine. Lifetime: the SimKfd must outlive the KfdOps from
// Ops() and every span from BoBytes() (a span lives as long as its process).
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/kfd/gpu_backend.h"
#include "plugin/kfd/kfd_ops.h"
#include "plugin/kfd/topology.h"

namespace vramflow {

// The properties every simulated GPU reports (an MI210-like device). node_id,
// gpu_id, drm_render_minor, hive_id, io_links_count and iolinks are filled
// per GPU by SimKfd.
KfdNode SimGpuProperties();

struct SimKfdOptions {
  uint32_t gpus = 2;
  // GPU i gets gpu_id first_gpu_id + i * gpu_id_stride and render minor
  // first_render_minor + i; it is topology node i + 1 (node 0 is the CPU).
  uint32_t first_gpu_id = 0x1000;
  uint32_t gpu_id_stride = 0x111;
  uint32_t first_render_minor = 128;
  KfdNode gpu_properties = SimGpuProperties();
  // Nonzero: all GPUs form one XGMI hive with this id (and XGMI links).
  uint64_t xgmi_hive_id = 0;
  // What GetVersion reports.
  uint32_t kfd_major = 1;
  uint32_t kfd_minor = 16;
  // Restore requires each device's drm_fd to be a render node of its actual
  // GPU from OpenRenderNode (the kernel checks the DRM file it is given).
  bool check_drm_fds = true;
  // Non-empty: KFD files (OpenKfd) and render nodes (OpenRenderNode) are
  // character device nodes made in this directory, c 10:237 (loop-control,
  // which opening does nothing to), not memfds. A real CRIU hands a
  // process's open device node to the plugin's DUMP_EXT_FILE, and a task it
  // restores holds one again (a memfd CRIU would dump and restore itself,
  // as a plain memfd). Needs CAP_MKNOD.
  std::string kfd_node_dir;
  // The kernel has AMDGPU_GEM_LIST_HANDLES (ListDrmBos); false: an older
  // kernel, whose render nodes' DRM BOs cannot be listed.
  bool gem_list_handles = true;
};

// One BO of a process being built (AddProcess).
struct SimKfdBoSpec {
  uint64_t addr = 0;  // GPU VA, page-aligned
  uint64_t size = 0;
  uint32_t alloc_flags = kKfdBoVram;  // exactly one of kKfdBo*, plus any high flag bits
  uint32_t gpu_id = 0;                // actual gpu_id; must be one of the process's GPUs
};

// A BO as the machine holds it.
struct SimKfdBoInfo {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t alloc_flags = 0;
  uint32_t gpu_id = 0;       // the GPU it is on
  uint32_t user_gpu_id = 0;  // the gpu_id the process knows (differs after a remapping restore)
  uint64_t offset = 0;       // mmap offset
  int fd = -1;               // VRAM/GTT: the memfd holding the contents (owned by SimKfd); else -1
};

// A file as the machine knows it: its st_dev and st_ino. Render nodes and
// KFD files are memfds (or device nodes made for one open), one inode per
// open, so a dup or a passed fd is the same SimKfdFile and a new open is not.
struct SimKfdFile {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const SimKfdFile&) const = default;
};

enum class SimKfdProcessState {
  kRunning,   // queues active
  kPaused,    // ProcessInfo evicted the queues; Checkpoint and Unpause allowed
  kRestored,  // recreated by Restore; waits for Resume
};

// Fault injection. An injected failure happens before the op does anything,
// and is logged like any call.
struct SimKfdFaults {
  // "GetVersion", "ProcessInfo", "Checkpoint", "Unpause", "Restore" or
  // "Resume"; empty: none. The op fails with `fail_errno` once it has been
  // called `fail_after` times since SetFaults (each call counts, failed ones
  // too), and on every call after that.
  std::string fail_op;
  int fail_errno = EIO;
  uint32_t fail_after = 0;
  // Checkpoint returns one BO fewer than ProcessInfo reported (as a kernel
  // that lost a BO between the two calls would).
  bool checkpoint_drops_last_bo = false;
};

class SimKfd {
 public:
  explicit SimKfd(SimKfdOptions options = {});
  ~SimKfd();
  SimKfd(const SimKfd&) = delete;
  SimKfd& operator=(const SimKfd&) = delete;

  // --- The machine.
  std::vector<uint32_t> GpuIds() const;  // in node order
  Result<Topology> MachineTopology() const;
  // Writes the topology as amdkfd publishes it under `root` (root/nodes/<n>/
  // gpu_id, properties, mem_banks/0/properties, io_links/<k>/properties), for
  // ParseTopology(root).
  Status WriteSysfsTopology(const std::string& root) const;

  // --- Processes.
  // A process using every GPU of the machine (as the ROCm runtime opens them
  // all), or only `gpu_ids`. VRAM/GTT BOs start zero-filled.
  Status AddProcess(pid_t pid, std::vector<SimKfdBoSpec> bos);
  Status AddProcess(pid_t pid, std::vector<SimKfdBoSpec> bos, std::vector<uint32_t> gpu_ids);
  // Process `importer` imports BO `index` of `exporter` through a dma-buf
  // (KFD's IMPORT_DMABUF) at GPU VA `addr`: one buffer, two processes. It
  // becomes the importer's last BO (same size, type and GPU) and its
  // Checkpoint exports the same memory.
  Status ShareBo(pid_t exporter, size_t index, pid_t importer, uint64_t addr);
  // The process exits: its KFD state goes (fds to it then fail with ESRCH).
  Status RemoveProcess(pid_t pid);
  bool HasProcess(pid_t pid) const;
  Result<SimKfdProcessState> ProcessState(pid_t pid) const;
  // {user_gpu_id, actual_gpu_id} per device of the process, drm_fd unset.
  Result<std::vector<KfdDevice>> ProcessDevices(pid_t pid) const;
  // The DRM file that Restore of `pid` was given for its device on GPU
  // `gpu_id` (actual), as KFD keeps it per device (the drm_file it acquires
  // the GPU VM through). InvalidArgument for a process or GPU without one
  // (not restored, or not on that GPU).
  Result<SimKfdFile> RestoreDrmFile(pid_t pid, uint32_t gpu_id) const;
  // The BOs in checkpoint order (creation order; for a restored process, the
  // order of the buckets it was restored from).
  Result<std::vector<SimKfdBoInfo>> Bos(pid_t pid) const;
  // The contents of BO `index` (VRAM/GTT only), valid while the process lives.
  Result<std::span<uint8_t>> BoBytes(pid_t pid, size_t index);

  // --- Files. The machine keeps a dup of each file it hands out (so its
  // inode number is not reused) until it is destroyed.
  // A KFD file for `pid` (0: this process's pid), as the process's own
  // open("/dev/kfd"). The pid need not have KFD state yet (Restore needs it not to).
  Result<UniqueFd> OpenKfd(pid_t pid);
  // The file at `path` (a device node a process opened itself, say) becomes
  // a KFD file of `pid`, as if that process had opened /dev/kfd.
  Status AdoptKfdFile(pid_t pid, const std::string& path);
  // The render node of a GPU (/dev/dri/renderD<minor>).
  Result<UniqueFd> OpenRenderNode(uint32_t gpu_id);
  // The GPU of a render node fd from OpenRenderNode.
  Result<uint32_t> RenderNodeGpu(int fd) const;
  // A BO allocated through DRM (GEM_CREATE, or imported from a dma-buf) in
  // the render-node file `render_fd`, as Mesa or OpenCL would; returns its
  // GEM handle in that file. Only ListDrmBos sees it (KFD does not).
  Result<uint32_t> AddDrmBo(int render_fd, uint64_t size, bool imported);
  // The DRM BOs of a render-node file, as AMDGPU_GEM_LIST_HANDLES lists them
  // (NotSupported without SimKfdOptions::gem_list_handles).
  Result<std::vector<DrmBo>> ListDrmBos(int render_fd) const;
  // What the file with this st_dev/st_ino is: one of the machine's KFD
  // files, one of its render nodes, or neither (kNone). For
  // GpuBackend::Classify, which sees a stat, not an fd.
  GpuFileKind FileKind(uint64_t dev, uint64_t ino) const;
  // The GPU of a render node file, by inode; 0 for any other file.
  uint32_t FileGpu(uint64_t dev, uint64_t ino) const;

  // --- KFD's CRIU operations over this machine.
  std::unique_ptr<KfdOps> Ops();

  // --- Test controls.
  void SetFaults(SimKfdFaults faults);
  void SetVersion(uint32_t major, uint32_t minor);
  std::vector<std::string> CallLog() const;
  void ClearCallLog();

 private:
  class OpsImpl;
  struct Bo;
  struct Process;
  struct FileKey {
    uint64_t dev = 0;
    uint64_t ino = 0;
    auto operator<=>(const FileKey&) const = default;
  };
  struct OpenFile {
    UniqueFd keepalive;  // holds the inode, so its number is not reused
    bool kfd = false;    // a KFD file (of `pid`), else a render node (of `gpu_id`)
    pid_t pid = 0;
    uint32_t gpu_id = 0;
    std::vector<DrmBo> drm_bos;  // render node: its DRM BOs (AddDrmBo)
  };

  // The op calls, under mu_.
  Status GetVersionLocked(uint32_t* major, uint32_t* minor);
  Result<KfdProcessInfo> ProcessInfoLocked(int kfd_fd, pid_t pid);
  Result<KfdCheckpoint> CheckpointLocked(int kfd_fd, const KfdProcessInfo& info);
  Status UnpauseLocked(int kfd_fd);
  Status RestoreLocked(int kfd_fd, KfdCheckpoint* state);
  Status ResumeLocked(int kfd_fd, pid_t pid);

  // Logs `op` and returns the injected fault for it, if any.
  Status EnterOp(const std::string& op);
  Result<pid_t> KfdFilePid(int fd, const std::string& op) const;
  Result<Process*> FindProcess(pid_t pid, const std::string& op);
  const KfdNode* FindGpuNode(uint32_t gpu_id) const;
  Status CheckDrmFd(int drm_fd, uint32_t gpu_id) const;
  Result<std::unique_ptr<Bo>> CreateBo(pid_t pid, const SimKfdBoSpec& spec, uint32_t user_gpu_id);
  uint64_t MmapOffset(uint32_t alloc_flags, uint32_t gpu_id, uint64_t addr, uint64_t size);
  Result<UniqueFd> OpenFileLocked(const std::string& name, OpenFile file);
  Result<UniqueFd> OpenNodeLocked(const std::string& prefix, OpenFile file);
  Status RegisterFileLocked(int fd, const std::string& name, OpenFile file);

  const SimKfdOptions options_;
  const Topology topology_;
  mutable std::mutex mu_;
  std::map<pid_t, std::unique_ptr<Process>> processes_;  // GUARDED_BY(mu_)
  std::map<FileKey, OpenFile> files_;                    // GUARDED_BY(mu_)
  uint64_t next_gem_offset_;                             // GUARDED_BY(mu_)
  uint32_t kfd_major_;                                   // GUARDED_BY(mu_)
  uint32_t kfd_minor_;                                   // GUARDED_BY(mu_)
  SimKfdFaults faults_;                                  // GUARDED_BY(mu_)
  uint32_t fault_op_calls_ = 0;                          // GUARDED_BY(mu_)
  uint64_t nodes_made_ = 0;                              // GUARDED_BY(mu_)
  std::vector<std::string> log_;                         // GUARDED_BY(mu_)
};

}  // namespace vramflow
