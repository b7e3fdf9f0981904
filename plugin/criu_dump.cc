// SPDX-License-Identifier: MIT
#include "plugin/criu_dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <set>

#include "common/endian.h"
#include "common/units.h"
#include "criu_amdgpu.pb.h"
#include "plugin/dumped_bos.h"
#include "plugin/kfd/kfd_devinfo.h"
#include "plugin/kfd_file_list.h"
#include "plugin/kfd_image.h"
#include "plugin/vram_base.h"
#include "plugin/vram_io.h"

namespace vramflow {
namespace {

// The ROCm runtime's shared memory (libhsakmt): upstream records its size
// and first word so restore can recreate it; vramflow also records its mode
// and owner, and those of the semaphore beside it, so that restore
// recreates them as they were whatever its umask (CRIU checks the mode of a
// mapped file).
constexpr char kHsakmtSharedMem[] = "/dev/shm/hsakmt_shared_mem";
constexpr char kHsakmtSemaphoreFile[] = "/dev/shm/sem.hsakmt_semaphore";

void RecordShmFile(const struct stat& st, criu::VramflowShmFile* file) {
  file->set_mode(st.st_mode & 07777);
  file->set_uid(st.st_uid);
  file->set_gid(st.st_gid);
}

void RecordHsakmtSharedMem(criu::CriuKfd* kfd) {
  kfd->set_shared_mem_size(0);
  kfd->set_shared_mem_magic(0);
  UniqueFd fd(::open(kHsakmtSharedMem, O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return;
  uint8_t magic[4] = {};
  if (::pread(fd.get(), magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic)) return;
  kfd->set_shared_mem_size(static_cast<uint64_t>(st.st_size));
  kfd->set_shared_mem_magic(LoadLE32(magic));
  RecordShmFile(st, kfd->mutable_vramflow_shared_mem_file());
  if (::stat(kHsakmtSemaphoreFile, &st) == 0 && S_ISREG(st.st_mode))
    RecordShmFile(st, kfd->mutable_vramflow_semaphore_file());
}

// The machine as the process sees it: every CPU node, and only the GPUs it
// has KFD devices on. As upstream's image, where each GPU entry is one of
// the process's devices (num_of_gpus is their count): a GPU the process does
// not use, written in, would be handed to KFD's RESTORE as a device the
// process never had.
Topology ProcessTopology(const Topology& machine, const std::map<uint32_t, uint32_t>& process_gpus) {
  Topology process;
  for (const KfdNode& node : machine.nodes)
    if (!node.is_gpu() || process_gpus.count(node.gpu_id)) process.nodes.push_back(node);
  return process;
}

// Writes one metadata image and commits it.
Status WriteMetadata(ImageStore& store, const std::string& name, const google::protobuf::MessageLite& msg) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, store.Create(name));
  VF_RETURN_IF_ERROR(WriteImage(*sink, msg).WithContext(name));
  return sink->Commit().WithContext(name);
}

Status DumpPaused(const PluginContext& ctx, int kfd_fd, int id, const KfdProcessInfo& info, KfdDumpResult* result) {
  KfdOps& kfd = ctx.backend->Kfd();
  VF_ASSIGN_OR_RETURN(KfdCheckpoint checkpoint, kfd.Checkpoint(kfd_fd, info));
  // Every dma-buf fd KFD installed is ours to close, whatever happens next.
  std::vector<UniqueFd> dmabufs;
  for (const KfdBo& bo : checkpoint.bos)
    if (bo.dmabuf_fd >= 0) dmabufs.emplace_back(bo.dmabuf_fd);
  if (checkpoint.bos.size() != info.num_bos || checkpoint.devices.size() != info.num_devices)
    return Status::Internal("KFD's CHECKPOINT returned " + std::to_string(checkpoint.devices.size()) + " devices and " +
                            std::to_string(checkpoint.bos.size()) + " BOs, but PROCESS_INFO announced " +
                            std::to_string(info.num_devices) + " and " + std::to_string(info.num_bos));

  VF_ASSIGN_OR_RETURN(Topology topology, ctx.backend->LocalTopology());
  for (const KfdDevice& device : checkpoint.devices) {
    if (!topology.FindGpu(device.actual_gpu_id))
      return Status::InvalidArgument("KFD reports the process on GPU " + Hex(device.actual_gpu_id) +
                                     ", which KFD's topology does not list");
    result->user_gpu_ids[device.actual_gpu_id] = device.user_gpu_id;
  }

  criu::CriuKfd image;
  image.set_pid(info.pid);  // as upstream: KFD's pid of the process
  TopologyToImage(ProcessTopology(topology, result->user_gpu_ids), result->user_gpu_ids, &image);
  image.set_num_of_bos(checkpoint.bos.size());
  DumpedBos this_file_only;
  DumpedBos& dumped = ctx.dumped_bos ? *ctx.dumped_bos : this_file_only;
  for (size_t i = 0; i < checkpoint.bos.size(); ++i) {
    const KfdBo& bo = checkpoint.bos[i];
    criu::KfdBoEntry* e = image.add_bo_entries();
    e->set_addr(bo.addr);
    e->set_size(bo.size);
    e->set_offset(bo.offset);
    e->set_alloc_flags(bo.alloc_flags);
    e->set_gpu_id(bo.gpu_id);
    if (KfdBoHasContents(bo.alloc_flags) && bo.dmabuf_fd < 0)
      return Status::Internal("KFD gave no dma-buf fd for BO " + std::to_string(i) + " at GPU VA " + Hex(bo.addr));
    // As upstream: the BO's GEM handle in the dumper's DRM file of its GPU,
    // -1 for a BO without a dma-buf (doorbell, MMIO, userptr).
    e->set_handle(static_cast<uint32_t>(-1));
    if (bo.dmabuf_fd < 0) continue;
    const KfdNode* gpu = nullptr;
    for (const KfdDevice& device : checkpoint.devices)
      if (device.user_gpu_id == bo.gpu_id) gpu = topology.FindGpu(device.actual_gpu_id);
    if (!gpu)
      return Status::Internal("BO " + std::to_string(i) + " is on GPU " + Hex(bo.gpu_id) + ", none of the process's");
    Result<uint32_t> handle = ctx.backend->GemHandle(*gpu, bo.dmabuf_fd);
    if (!handle.ok()) return handle.status().WithContext("BO " + std::to_string(i) + " at GPU VA " + Hex(bo.addr));
    e->set_handle(*handle);
    VF_RETURN_IF_ERROR(dumped.Record(gpu->gpu_id, *handle,
                                     "BO " + std::to_string(i) + " of process " + std::to_string(info.pid) +
                                         " (GPU VA " + Hex(bo.addr) + ", " + std::to_string(bo.size) + " bytes)"));
  }
  image.set_num_of_objects(checkpoint.num_objects);
  image.set_priv_data(checkpoint.priv_data.data(), checkpoint.priv_data.size());
  if (!ctx.dump_id.empty()) image.set_vramflow_dump_id(ctx.dump_id);
  RecordHsakmtSharedMem(&image);

  // Contents first, one stream per GPU; the metadata image last, so a
  // complete-looking amdgpu-kfd image always has its streams.
  for (const KfdDevice& device : checkpoint.devices) {
    std::vector<VramBo> bos;
    for (size_t i = 0; i < checkpoint.bos.size(); ++i) {
      const KfdBo& bo = checkpoint.bos[i];
      if (bo.gpu_id != device.user_gpu_id || !KfdBoHasContents(bo.alloc_flags)) continue;
      bos.push_back(VramBo{static_cast<uint32_t>(i), bo.size, bo.addr, bo.dmabuf_fd});
    }
    const KfdNode* node = topology.FindGpu(device.actual_gpu_id);
    VF_ASSIGN_OR_RETURN(std::unique_ptr<Device> dma, ctx.backend->OpenDevice(*node));
    const std::string name = VramStreamName(id, device.user_gpu_id);
    VF_RETURN_IF_ERROR(RefuseBaseAsTarget(*ctx.options, ctx.vram->Location(name), name));
    Result<std::unique_ptr<ByteSink>> sink = ctx.vram->Create(name);
    if (!sink.ok()) return sink.status().WithContext(name);
    PipelineOptions pipeline = ctx.options->pipeline;
    if (!ctx.options->base.empty()) {
      // Each GPU's base is its own stream: one location for several is the wrong base for all but one.
      if (NamesOneImage(ctx.options->base) && checkpoint.devices.size() > 1)
        return Status::InvalidArgument("VRAMFLOW_BASE=" + ctx.options->base +
                                       " names one stream, but the process has " +
                                       std::to_string(checkpoint.devices.size()) +
                                       " GPUs, each with a stream of its own: put {name} in it, or name a directory");
      VF_ASSIGN_OR_RETURN(pipeline.base, OpenVramBase(*ctx.options, name));
    }
    PipelineStats stats;
    VF_RETURN_IF_ERROR(DumpVram(*dma, device.user_gpu_id, bos, **sink, pipeline, &stats, ctx.dump_id));
    result->stats.objects += stats.objects;
    result->stats.raw_bytes += stats.raw_bytes;
    result->stats.stream_bytes += stats.stream_bytes;
    result->stats.zero_bytes += stats.zero_bytes;
    result->stats.dedup_bytes += stats.dedup_bytes;
    result->stats.base_ref_bytes += stats.base_ref_bytes;
    result->stats.base_delta_bytes += stats.base_delta_bytes;
    result->stats.seconds += stats.seconds;
  }
  return WriteMetadata(*ctx.images, KfdImageName(id), image);
}

}  // namespace

Result<KfdDumpResult> DumpKfdFile(const PluginContext& ctx, int kfd_fd, int id, bool unpause_now) {
  KfdOps& kfd = ctx.backend->Kfd();
  uint32_t major = 0, minor = 0;
  VF_RETURN_IF_ERROR(kfd.GetVersion(&major, &minor));
  VF_RETURN_IF_ERROR(CheckKfdVersion(major, minor));

  VF_ASSIGN_OR_RETURN(KfdProcessInfo info, kfd.ProcessInfo(kfd_fd, 0));
  // From here the process is paused: whatever happens, it runs again unless
  // the caller takes over unpausing after a success.
  KfdDumpResult result;
  Status status = DumpPaused(ctx, kfd_fd, id, info, &result);
  if (unpause_now || !status.ok()) {
    Status unpause = kfd.Unpause(kfd_fd);
    if (status.ok()) status = unpause;
  }
  if (!status.ok()) return status.WithContext("dumping KFD file " + std::to_string(id));
  return result;
}

Status DumpRenderNodeFile(const PluginContext& ctx, int render_fd, int id, uint32_t gpu_id,
                          const std::map<uint32_t, uint32_t>& user_gpu_ids) {
  VF_ASSIGN_OR_RETURN(Topology topology, ctx.backend->LocalTopology());
  const KfdNode* node = topology.FindGpu(gpu_id);
  if (!node) return Status::InvalidArgument("render node of GPU " + Hex(gpu_id) + " is not in KFD's topology");
  // BOs made through the render node itself (GEM_CREATE by Mesa, OpenCL,
  // Vulkan; or imported dma-bufs) are not KFD's and vramflow does not save
  // them: refuse the dump rather than lose their contents.
  Result<std::vector<DrmBo>> drm_bos = ctx.backend->ListDrmBos(render_fd);
  if (!drm_bos.ok() && drm_bos.status().code() != Status::Code::kNotSupported) return drm_bos.status();
  if (drm_bos.ok() && !drm_bos->empty()) {
    uint64_t bytes = 0;
    size_t imported = 0;
    for (const DrmBo& bo : *drm_bos) {
      bytes += bo.size;
      imported += bo.imported ? 1 : 0;
    }
    return Status::NotSupported("render node renderD" + std::to_string(node->drm_render_minor) + " (file " +
                                std::to_string(id) + ") holds " + std::to_string(drm_bos->size()) +
                                " BOs allocated through DRM, not KFD (" + std::to_string(imported) +
                                " imported from dma-bufs, " + std::to_string(bytes) + " bytes in all; GEM handle " +
                                std::to_string(drm_bos->front().handle) +
                                " first). vramflow saves only KFD BOs, so the dump is refused "
                                "rather than lose their contents; upstream's plugin saves DRM BOs");
  }
  auto it = user_gpu_ids.find(gpu_id);
  criu::CriuRenderNode image;
  image.set_gpu_id(it == user_gpu_ids.end() ? gpu_id : it->second);
  image.set_id(static_cast<uint32_t>(id));
  image.set_drm_render_minor(node->drm_render_minor);
  image.set_num_of_bos(0);  // render-node BOs (criu-dev's DRM path) are not saved; see docs/PLUGIN.md
  return WriteMetadata(*ctx.images, RenderImageName(id), image);
}

Status RemoveEarlierDumpsImages(int images_dir, const std::set<std::string>& written) {
  // A directory stream of its own: CRIU's fd keeps its offset.
  UniqueFd fd(::openat(images_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fd.valid() ? ::fdopendir(fd.get()) : nullptr, ::closedir);
  if (!dir) return Status::FromErrno("listing the images directory for an earlier dump's images", errno);
  static_cast<void>(fd.Release());  // closedir closes it
  std::vector<std::string> stale;
  while (const struct dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    const bool ours = name.rfind("amdgpu-kfd-", 0) == 0 || name.rfind("amdgpu-renderD-", 0) == 0 ||
                      name.rfind("amdgpu-vram-", 0) == 0 || name.rfind("amdgpu-pages-", 0) == 0 ||
                      name == kKfdFileListImage;
    const bool image = name.size() > 4 && name.compare(name.size() - 4, 4, ".img") == 0;
    if (ours && image && !written.count(name)) stale.push_back(name);
  }
  Status status;
  for (const std::string& name : stale)
    if (::unlinkat(::dirfd(dir.get()), name.c_str(), 0) != 0 && errno != ENOENT && status.ok())
      status = Status::FromErrno("removing " + name + ", an earlier dump's image, from the images directory", errno);
  return status;
}

}  // namespace vramflow
