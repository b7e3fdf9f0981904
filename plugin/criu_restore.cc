// SPDX-License-Identifier: MIT
#include "plugin/criu_restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/endian.h"
#include "common/printable.h"
#include "common/units.h"
#include "criu_amdgpu.pb.h"
#include "plugin/kfd/kfd_devinfo.h"
#include "plugin/kfd_file_list.h"
#include "plugin/kfd_image.h"
#include "plugin/vram_base.h"

namespace vramflow {
namespace {

constexpr char kHsakmtSharedMem[] = "/dev/shm/hsakmt_shared_mem";
// libhsakmt's semaphore beside it (sem_open's name: /dev/shm/sem.hsakmt_semaphore).
constexpr char kHsakmtSemaphore[] = "/hsakmt_semaphore";
constexpr char kHsakmtSemaphoreFile[] = "/dev/shm/sem.hsakmt_semaphore";
// The longest a task waits for the main process to take its job.
constexpr std::chrono::milliseconds kHandOverTimeout{30000};

std::string Octal(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0%o", mode);
  return buf;
}

// Whether `s` came from errno `err` (Status::FromErrno ends with its text).
bool HasErrno(const Status& s, int err) {
  const std::string text = std::strerror(err);
  const std::string& m = s.message();
  return m.size() >= text.size() && m.compare(m.size() - text.size(), text.size(), text) == 0;
}

// Gives a file the plugin just created the owner and mode it had at dump:
// CRIU refuses to map a file whose mode differs from the dumped one, and the
// mode of a new file depends on the restoring process's umask.
Status SetRecordedOwnerAndMode(int fd, const std::string& path, const criu::VramflowShmFile& recorded) {
  if (::fchown(fd, recorded.uid(), recorded.gid()) != 0)
    return Status::FromErrno(
        "giving " + path + " its owner " + std::to_string(recorded.uid()) + ":" + std::to_string(recorded.gid()),
        errno);
  if (::fchmod(fd, recorded.mode() & 07777) != 0)
    return Status::FromErrno("giving " + path + " its mode " + Octal(recorded.mode() & 07777), errno);
  return Status::Ok();
}

// Recreates the ROCm runtime's shared memory as upstream does, when the
// image recorded one and it is not there yet: with the mode and owner it
// had at dump where the image has them (vramflow's images), else 0666 less
// the umask (upstream's).
Status RestoreHsakmtSharedMem(const criu::CriuKfd& image) {
  if (image.shared_mem_size() == 0) return Status::Ok();
  const bool recorded = image.has_vramflow_shared_mem_file();
  UniqueFd fd(::open(kHsakmtSharedMem, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, recorded ? 0600 : 0666));
  if (!fd.valid()) {
    if (errno == EEXIST) return Status::Ok();
    return Status::FromErrno(std::string("creating ") + kHsakmtSharedMem, errno);
  }
  if (recorded)
    VF_RETURN_IF_ERROR(SetRecordedOwnerAndMode(fd.get(), kHsakmtSharedMem, image.vramflow_shared_mem_file()));
  if (::ftruncate(fd.get(), static_cast<off_t>(image.shared_mem_size())) != 0)
    return Status::FromErrno(std::string("sizing ") + kHsakmtSharedMem, errno);
  uint8_t magic[4];
  StoreLE32(magic, image.shared_mem_magic());
  if (::pwrite(fd.get(), magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic))
    return Status::FromErrno(std::string("writing ") + kHsakmtSharedMem, errno);
  return Status::Ok();
}

// The semaphore libhsakmt opens beside its shared memory: on a fresh
// /dev/shm (a new host, a container) CRIU could not restore the task's
// mapping of it. Created as upstream does (value 1), unless it exists, then
// given the mode and owner it had at dump where the image has them.
Status RestoreHsakmtSemaphore(const criu::CriuKfd& image) {
  if (image.shared_mem_size() == 0) return Status::Ok();
  const bool recorded = image.has_vramflow_semaphore_file();
  sem_t* sem = ::sem_open(kHsakmtSemaphore, O_CREAT | O_EXCL, recorded ? 0600 : 0666, 1);
  if (sem == SEM_FAILED) {
    if (errno == EEXIST) return Status::Ok();
    return Status::FromErrno(std::string("creating the semaphore ") + kHsakmtSemaphore, errno);
  }
  ::sem_close(sem);
  if (!recorded) return Status::Ok();
  UniqueFd fd(::open(kHsakmtSemaphoreFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(std::string("opening ") + kHsakmtSemaphoreFile, errno);
  return SetRecordedOwnerAndMode(fd.get(), kHsakmtSemaphoreFile, image.vramflow_semaphore_file());
}

// An fd the plugin keeps in a restored task goes above every fd CRIU will
// install there (CRIU's find_unused_fd_pid, as upstream does): a low number
// would be taken when CRIU installs the task's own file under it ("fd N
// already in use"). Outside CRIU (no such function) it stays where it is.
Result<UniqueFd> KeepAboveTaskFds(const PluginContext& ctx, UniqueFd fd, TaskRestoreState* task) {
  if (!ctx.find_unused_fd_pid) return fd;
  if (task->next_kept_fd < 0) {
    const int first = ctx.find_unused_fd_pid(::getpid());
    if (first <= 0)
      return Status::Internal("CRIU found no free fd number above task " + std::to_string(::getpid()) + "'s files");
    task->next_kept_fd = first;
  }
  UniqueFd moved(::fcntl(fd.get(), F_DUPFD_CLOEXEC, task->next_kept_fd));
  if (!moved.valid())
    return Status::FromErrno("moving an fd to " + std::to_string(task->next_kept_fd) + " or above", errno);
  task->next_kept_fd = moved.get() + 1;
  return moved;
}

// An fd of this process that is the file (dev, ino), or -1. Every fd of a
// restored task that is a render node of a GPU came from the plugin, as
// that GPU's one RestoredRenderNode.
int FindOpenFile(dev_t dev, ino_t ino) {
  auto is_it = [&](int fd) {
    struct stat st;
    return ::fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  };
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    int found = -1;
    while (const struct dirent* e = ::readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] != '.' && fd != ::dirfd(dir) && is_it(fd)) found = fd;
      if (found >= 0) break;
    }
    ::closedir(dir);
    return found;
  }
  struct rlimit limit {};  // no /proc in this mount namespace: try every number
  ::getrlimit(RLIMIT_NOFILE, &limit);
  const int last = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 20));
  for (int fd = 0; fd < last; ++fd)
    if (::fcntl(fd, F_GETFD) >= 0 && is_it(fd)) return fd;
  return -1;
}

// An fd of the render node of `gpu` that KFD's restore was given (opened
// and kept on first use): the plugin's own, or the task's once handed over.
Result<int> RenderFd(const PluginContext& ctx, const KfdNode& gpu, TaskRestoreState* task) {
  auto it = task->render_nodes.find(gpu.gpu_id);
  if (it != task->render_nodes.end()) {
    if (it->second.kept.valid()) return it->second.kept.get();
    const int fd = FindOpenFile(it->second.dev, it->second.ino);
    if (fd < 0)
      return Status::Internal("the render node of GPU " + Hex(gpu.gpu_id) +
                              " that KFD's restore was given is no longer open in task " + std::to_string(::getpid()));
    return fd;
  }
  VF_ASSIGN_OR_RETURN(UniqueFd opened, ctx.backend->OpenRenderNode(gpu));
  VF_ASSIGN_OR_RETURN(UniqueFd fd, KeepAboveTaskFds(ctx, std::move(opened), task));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return Status::FromErrno("fstat of the render node of GPU " + Hex(gpu.gpu_id), errno);
  const int raw = fd.get();
  task->render_nodes[gpu.gpu_id] = RestoredRenderNode{std::move(fd), st.st_dev, st.st_ino};
  return raw;
}

// The dump id of a KFD image (empty: none, an older vramflow's or
// upstream's, not checked) must have its form, and be the one the dump's
// KFD file list names where the main process read one (the parallel-restore
// worker checks the streams against that).
Status CheckImageDumpId(const PluginContext& ctx, const std::string& what, const std::string& dump_id) {
  if (dump_id.empty()) return Status::Ok();
  if (!IsDumpId(dump_id))
    return Status::Corruption(what + ": its dump id " + Printable(dump_id) + " is not 32 lowercase hex digits");
  if (!ctx.dump_id.empty() && dump_id != ctx.dump_id)
    return Status::InvalidArgument(what + " is of dump " + dump_id + ", but " + kKfdFileListImage + " is of dump " +
                                   ctx.dump_id + ": images of two checkpoints; refused");
  return Status::Ok();
}

// KFD gives the restored state to the process that runs its RESTORE. CRIU
// restores a file that several tasks hold (a /dev/kfd that forked workers
// inherited, as PyTorch's DataLoader's do) in the holder with the lowest
// pid, which need not be the process the image names: there the state would
// come back in the wrong process, so the restore is refused. The named
// process runs no hook of its own for a file it receives, so nothing can
// restore it there instead. Only a pid that is a task of this restore
// counts: one that exists (CRIU forks every task before any restores its
// files) and that CRIU's find_unused_fd_pid knows. Outside CRIU, and for a
// pid CRIU does not restore, nothing is checked.
Status CheckRestoringProcess(const PluginContext& ctx, const criu::CriuKfd& image, const std::string& what) {
  const pid_t self = ::getpid(), owner = static_cast<pid_t>(image.pid());
  if (owner == self || owner <= 0 || !ctx.find_unused_fd_pid) return Status::Ok();
  if ((::kill(owner, 0) != 0 && errno == ESRCH) || ctx.find_unused_fd_pid(owner) <= 0) return Status::Ok();
  return Status::NotSupported(what + " is process " + std::to_string(owner) +
                              "'s KFD file, but CRIU restores it in process " + std::to_string(self) +
                              ", which holds it too (an inherited /dev/kfd: CRIU restores a shared file in its "
                              "holder with the lowest pid). KFD would give process " +
                              std::to_string(self) + " the GPU state of process " + std::to_string(owner) +
                              ", so the restore is refused; it works when the process that opened /dev/kfd has "
                              "the lowest pid of those holding it");
}

Result<RestoreFileResult> RestoreKfd(const PluginContext& ctx, int id, ByteSource& source, TaskRestoreState* task,
                                     const std::string& parallel_server) {
  const std::string what = KfdImageName(id);
  criu::CriuKfd image;
  VF_RETURN_IF_ERROR(ReadImage(source, &image, what));
  if (image.num_of_bos() != static_cast<uint64_t>(image.bo_entries_size()))
    return Status::Corruption(what + ": num_of_bos " + std::to_string(image.num_of_bos()) + " but " +
                              std::to_string(image.bo_entries_size()) + " BO entries");
  VF_RETURN_IF_ERROR(CheckImageDumpId(ctx, what, image.vramflow_dump_id()));

  VF_RETURN_IF_ERROR(CheckRestoringProcess(ctx, image, what));
  KfdOps& kfd = ctx.backend->Kfd();
  uint32_t major = 0, minor = 0;
  VF_RETURN_IF_ERROR(kfd.GetVersion(&major, &minor));
  VF_RETURN_IF_ERROR(CheckKfdVersion(major, minor));

  VF_ASSIGN_OR_RETURN(Topology source_topology, TopologyFromImage(image, what));
  VF_ASSIGN_OR_RETURN(Topology local, ctx.backend->LocalTopology());
  if (!task->gpu_map) {
    Result<GpuMap> map = MapGpus(source_topology, local, ctx.options->checks);
    if (!map.ok()) return map.status().WithContext(what + ": the checkpoint's GPUs do not fit this machine's");
    task->gpu_map = std::move(*map);
  }
  const GpuMap& map = *task->gpu_map;

  KfdCheckpoint state;
  for (const KfdNode* gpu : source_topology.gpus()) {
    auto it = map.find(gpu->gpu_id);
    if (it == map.end()) return Status::Internal(what + ": GPU " + Hex(gpu->gpu_id) + " has no local GPU");
    const KfdNode* target = local.FindGpu(it->second);
    KfdDevice device;
    device.user_gpu_id = gpu->gpu_id;
    device.actual_gpu_id = target->gpu_id;
    VF_ASSIGN_OR_RETURN(device.drm_fd, RenderFd(ctx, *target, task));
    state.devices.push_back(device);
  }
  for (int i = 0; i < image.bo_entries_size(); ++i) {
    const criu::KfdBoEntry& e = image.bo_entries(i);
    if (!map.count(e.gpu_id()))
      return Status::Corruption(what + ": BO " + std::to_string(i) + " is on GPU " + Hex(e.gpu_id()) +
                                ", which the image's topology does not list");
    KfdBo bo;
    bo.addr = e.addr();
    bo.size = e.size();
    bo.offset = e.offset();
    bo.gpu_id = e.gpu_id();
    bo.alloc_flags = e.alloc_flags();
    state.bos.push_back(bo);
  }
  state.priv_data.assign(image.priv_data().begin(), image.priv_data().end());
  state.num_objects = image.num_of_objects();

  VF_ASSIGN_OR_RETURN(UniqueFd kfd_fd, ctx.backend->OpenKfd());
  Status restored = kfd.Restore(kfd_fd.get(), &state);
  std::vector<UniqueFd> dmabufs(state.bos.size());  // ours from here, closed on every path
  for (size_t i = 0; i < state.bos.size(); ++i)
    if (state.bos[i].dmabuf_fd >= 0) dmabufs[i].Reset(state.bos[i].dmabuf_fd);
  VF_RETURN_IF_ERROR(restored.WithContext(what));

  constexpr uint32_t kMapped = kKfdBoVram | kKfdBoGtt | kKfdBoMmioRemap | kKfdBoDoorbell;
  for (const KfdBo& bo : state.bos)
    if (bo.alloc_flags & kMapped) task->vmas.push_back({bo.addr, bo.offset, bo.restored_offset, map.at(bo.gpu_id)});

  // Contents, GPU by GPU, in the image's BO order.
  ParallelRestoreJob job;
  job.image_id = id;
  job.pid = ::getpid();
  std::vector<std::pair<uint32_t, std::vector<VramBo>>> gpus;
  for (const KfdNode* gpu : source_topology.gpus()) {
    std::vector<VramBo> bos;
    for (size_t i = 0; i < state.bos.size(); ++i) {
      const KfdBo& bo = state.bos[i];
      if (bo.gpu_id != gpu->gpu_id || !KfdBoHasContents(bo.alloc_flags)) continue;
      if (!dmabufs[i].valid())
        return Status::Internal(what + ": KFD's restore gave no dma-buf fd for BO " + std::to_string(i));
      bos.push_back(VramBo{static_cast<uint32_t>(i), bo.size, bo.addr, dmabufs[i].get()});
    }
    gpus.emplace_back(gpu->gpu_id, std::move(bos));
  }

  bool handed_over = false;
  if (!parallel_server.empty()) {
    Status dup_status;
    for (const auto& [image_gpu, bos] : gpus) {
      ParallelRestoreGpu g;
      g.image_gpu_id = image_gpu;
      g.target_gpu_id = map.at(image_gpu);
      for (const VramBo& bo : bos) {
        UniqueFd copy(::fcntl(bo.dmabuf_fd, F_DUPFD_CLOEXEC, 0));
        if (!copy.valid()) dup_status = Status::FromErrno("duplicating a dma-buf fd", errno);
        g.bos.push_back(ParallelRestoreBo{bo.index, bo.size, std::move(copy)});
      }
      job.gpus.push_back(std::move(g));
    }
    Status sent = dup_status.ok() ? SendParallelRestoreJob(parallel_server, job, kHandOverTimeout) : dup_status;
    if (sent.ok()) {
      handed_over = true;
    } else {
      std::fprintf(stderr,
                   "vramflow amdgpu_plugin: %s: the main CRIU process cannot take the BO contents (%s); "
                   "restoring them in this task\n",
                   what.c_str(), sent.ToString().c_str());
    }
  }
  if (!handed_over) {
    for (const auto& [image_gpu, bos] : gpus)
      VF_RETURN_IF_ERROR(
          RestoreGpuContents(ctx, id, image_gpu, *local.FindGpu(map.at(image_gpu)), bos, image.vramflow_dump_id()));
  }

  VF_RETURN_IF_ERROR(RestoreHsakmtSharedMem(image).WithContext(what));
  VF_RETURN_IF_ERROR(RestoreHsakmtSemaphore(image).WithContext(what));
  RestoreFileResult result;
  result.outcome = RestoreFileResult::Outcome::kRestored;
  result.fd = std::move(kfd_fd);
  result.kfd = true;
  return result;
}

Result<RestoreFileResult> RestoreRenderNode(const PluginContext& ctx, int id, ByteSource& source,
                                            TaskRestoreState* task) {
  const std::string what = RenderImageName(id);
  criu::CriuRenderNode image;
  VF_RETURN_IF_ERROR(ReadImage(source, &image, what));
  if (image.num_of_bos() != 0 || image.bo_entries_size() != 0)
    return Status::NotSupported(what + ": holds " + std::to_string(image.bo_entries_size()) +
                                " render-node BOs (criu-dev's DRM path), which vramflow does not restore yet");
  RestoreFileResult result;
  if (!task->gpu_map) {
    // The GPU mapping comes from the task's KFD image; CRIU may try again.
    result.outcome = RestoreFileResult::Outcome::kRetry;
    return result;
  }
  auto it = task->gpu_map->find(image.gpu_id());
  if (it == task->gpu_map->end())
    return Status::Corruption(what + ": GPU " + Hex(image.gpu_id()) + " is not among the checkpoint's GPUs");
  VF_ASSIGN_OR_RETURN(Topology local, ctx.backend->LocalTopology());
  const KfdNode* gpu = local.FindGpu(it->second);
  if (!gpu) return Status::Internal(what + ": mapped GPU " + Hex(it->second) + " vanished from the topology");
  // The task gets the DRM file KFD's restore was given, not a new one: KFD
  // grants mmap rights per DRM file, and the task's runtime maps new
  // allocations through this fd. The plugin's own fd itself, the first time
  // (CRIU moves the fd it is given to the file's number and closes it), so
  // that no fd of the plugin's stays beside the task's; a dup of the task's
  // for another render-node file of the same GPU.
  VF_ASSIGN_OR_RETURN(int fd, RenderFd(ctx, *gpu, task));
  RestoredRenderNode& node = task->render_nodes.at(gpu->gpu_id);
  if (node.kept.valid() && node.kept.get() == fd) {
    result.fd = std::move(node.kept);
  } else {
    result.fd.Reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!result.fd.valid()) return Status::FromErrno(what + ": duplicating the render node fd", errno);
  }
  result.outcome = RestoreFileResult::Outcome::kRestored;
  return result;
}

}  // namespace

Result<RestoreFileResult> RestoreFile(const PluginContext& ctx, int id, TaskRestoreState* task,
                                      const std::string& parallel_server) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> kfd, ctx.images->Open(KfdImageName(id)));
  if (kfd) return RestoreKfd(ctx, id, *kfd, task, parallel_server);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> render, ctx.images->Open(RenderImageName(id)));
  if (render) return RestoreRenderNode(ctx, id, *render, task);
  return RestoreFileResult{};
}

Status RestoreGpuContents(const PluginContext& ctx, int id, uint32_t image_gpu_id, const KfdNode& local_gpu,
                          const std::vector<VramBo>& bos, const std::string& dump_id) {
  const std::string stream_name = VramStreamName(id, image_gpu_id);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, ctx.backend->OpenDevice(local_gpu));
  Result<std::unique_ptr<ByteSource>> stream = ctx.vram->Open(stream_name);
  if (!stream.ok()) return stream.status().WithContext(stream_name);
  if (*stream) {
    PipelineOptions pipeline = ctx.options->pipeline;
    pipeline.open_base = VramBaseOpener(*ctx.options, stream_name);
    PipelineStats stats;
    Status restored = RestoreVram(*device, bos, **stream, pipeline, &stats, dump_id);
    // A network sender learns here that every byte reached the GPU.
    Status told = (*stream)->Finish(restored);
    VF_RETURN_IF_ERROR(restored);
    return told.WithContext("BOs restored, but telling the sender of " + stream_name + " failed");
  }
  const std::string pages_name = PagesImageName(id, image_gpu_id);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> pages, ctx.images->Open(pages_name));
  if (pages) return RestoreRawPages(*device, bos, *pages, ctx.options->pipeline);
  return Status::InvalidArgument("no BO contents for GPU " + Hex(image_gpu_id) + " of KFD file " + std::to_string(id) +
                                 ": neither " + stream_name + " in " + ctx.vram->Describe() + " nor " + pages_name +
                                 " in " + ctx.images->Describe());
}

Status RunParallelRestoreJob(const PluginContext& ctx, ParallelRestoreJob job) {
  // Anyone in this network namespace can reach the socket; only CRIU's own
  // restored tasks (still with CRIU's credentials at this stage) may hand us
  // fds to write checkpoint contents into.
  if (job.peer_uid != ::geteuid())
    return Status::InvalidArgument("a parallel-restore job came from uid " + std::to_string(job.peer_uid) + " (pid " +
                                   std::to_string(job.peer_pid) + "), not from CRIU's uid " +
                                   std::to_string(::geteuid()) + "; refused");
  VF_ASSIGN_OR_RETURN(Topology local, ctx.backend->LocalTopology());
  for (const ParallelRestoreGpu& gpu : job.gpus) {
    const KfdNode* node = local.FindGpu(gpu.target_gpu_id);
    if (!node) return Status::InvalidArgument("GPU " + Hex(gpu.target_gpu_id) + " is not in this machine's topology");
    std::vector<VramBo> bos;
    for (const ParallelRestoreBo& bo : gpu.bos) bos.push_back(VramBo{bo.index, bo.size, 0, bo.dmabuf.get()});
    VF_RETURN_IF_ERROR(RestoreGpuContents(ctx, job.image_id, gpu.image_gpu_id, *node, bos, ctx.dump_id));
  }
  return Status::Ok();
}

Result<std::optional<VmaUpdate>> UpdateVma(const TaskRestoreState& task, const std::string& path, uint64_t addr,
                                           uint64_t old_offset) {
  for (const RestoredVma& vma : task.vmas) {
    if (vma.addr != addr || vma.old_offset != old_offset) continue;
    VmaUpdate update;
    update.new_offset = vma.new_offset;
    if (path.find("/dev/dri/renderD") != std::string::npos) {
      auto it = task.render_nodes.find(vma.gpu_id);
      const int fd = it == task.render_nodes.end() ? -1
                     : it->second.kept.valid()     ? it->second.kept.get()
                                                   : FindOpenFile(it->second.dev, it->second.ino);
      if (fd < 0)
        return Status::Internal("no render node open for GPU " + Hex(vma.gpu_id) + " of mapping " + Hex(addr));
      update.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (update.fd < 0) return Status::FromErrno("duplicating the render node fd", errno);
    }
    return std::optional<VmaUpdate>(update);
  }
  return std::optional<VmaUpdate>();
}

Result<bool> ResumeProcess(const PluginContext& ctx, int pid) {
  // No KFD on this machine: nothing of ours to resume.
  Result<UniqueFd> kfd_fd = ctx.backend->OpenKfd();
  if (!kfd_fd.ok()) return HasErrno(kfd_fd.status(), ENOENT) ? Result<bool>(false) : kfd_fd.status();
  Status s = ctx.backend->Kfd().Resume(kfd_fd->get(), pid);
  if (s.ok()) return true;
  // ESRCH: KFD holds no restored state for this pid; another plugin's task.
  if (HasErrno(s, ESRCH)) return false;
  return s.WithContext("resuming GPU queues of pid " + std::to_string(pid));
}

}  // namespace vramflow
