// SPDX-License-Identifier: MIT
#include "tools/criu_export.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "common/owner_tag.h"
#include "common/unique_fd.h"
#include "common/units.h"
#include "criu_amdgpu.pb.h"
#include "plugin/kfd/kfd_ops.h"
#include "plugin/kfd_image.h"
#include "plugin/vram_io.h"
#include "streamer/device/file_device.h"
#include "streamer/format/amdgpu_pages.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

// The id of "amdgpu-kfd-<decimal id>.img", or -1 for any other name.
int KfdImageId(const std::string& name) {
  const std::string prefix = "amdgpu-kfd-", suffix = ".img";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::atoi(digits.c_str());
}

// The KFD images in `dir`, by id.
Result<std::vector<int>> ListKfdImages(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return Status::FromErrno("opening the images directory '" + dir + "'", errno);
  std::vector<int> ids;
  while (const dirent* e = ::readdir(d.get())) {
    const int id = KfdImageId(e->d_name);
    if (id >= 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) return Status::InvalidArgument("no amdgpu-kfd-<id>.img in '" + dir + "': nothing to export");
  return ids;
}

Result<bool> Exists(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return Status::FromErrno("looking for '" + path + "'", errno);
}

// What one GPU of one KFD image needs.
struct GpuPlan {
  ExportedGpu gpu;
  std::vector<VramBo> bos;  // its VRAM/GTT BOs, in image order (dmabuf_fd unused)
  std::string dump_id;      // the image's (empty: none); its stream must carry it
};

// Reads amdgpu-kfd-<id>.img and finds each GPU's source (step 1).
Status PlanImage(const ExportUpstreamOptions& options, int id, std::vector<GpuPlan>* plans) {
  const std::string image_name = KfdImageName(id);
  const std::string path = options.dir + "/" + image_name;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenFileSource(path));
  criu::CriuKfd image;
  VF_RETURN_IF_ERROR(ReadImage(*source, &image, path));
  if (image.num_of_bos() != static_cast<uint64_t>(image.bo_entries_size()))
    return Status::Corruption(path + ": num_of_bos " + std::to_string(image.num_of_bos()) + " but " +
                              std::to_string(image.bo_entries_size()) + " BO entries");
  std::vector<GpuPlan> found;
  // Upstream's restore reads a pages file for each device entry with a
  // gpu_id (CPU entries have none), in the entries' order.
  for (const criu::KfdDeviceEntry& device : image.device_entries()) {
    if (device.gpu_id() == 0) continue;
    GpuPlan plan;
    plan.gpu.kfd_image = image_name;
    plan.gpu.gpu_id = device.gpu_id();
    plan.gpu.pages = PagesImageName(id, device.gpu_id());
    plan.gpu.stream = VramStreamName(id, device.gpu_id());
    plan.dump_id = image.vramflow_dump_id();
    for (int i = 0; i < image.bo_entries_size(); ++i) {
      const criu::KfdBoEntry& bo = image.bo_entries(i);
      if (bo.gpu_id() != device.gpu_id() || !KfdBoHasContents(bo.alloc_flags())) continue;
      plan.bos.push_back(VramBo{static_cast<uint32_t>(i), bo.size(), bo.addr(), -1});
      plan.gpu.bos++;
      plan.gpu.bytes += bo.size();
    }
    found.push_back(std::move(plan));
  }
  for (int i = 0; i < image.bo_entries_size(); ++i) {
    const uint32_t gpu = image.bo_entries(i).gpu_id();
    if (std::none_of(found.begin(), found.end(), [&](const GpuPlan& p) { return p.gpu.gpu_id == gpu; }))
      return Status::Corruption(path + ": BO " + std::to_string(i) + " is on GPU " + Hex(gpu) +
                                ", which the image's topology does not list");
  }

  for (GpuPlan& plan : found) {
    const std::string where = image_name + ", GPU " + Hex(plan.gpu.gpu_id);
    VF_ASSIGN_OR_RETURN(bool has_stream, Exists(options.dir + "/" + plan.gpu.stream));
    VF_ASSIGN_OR_RETURN(bool has_pages, Exists(options.dir + "/" + plan.gpu.pages));
    if (!has_stream && !has_pages)
      return Status::InvalidArgument(where + ": neither " + plan.gpu.stream + " nor " + plan.gpu.pages + " in '" +
                                     options.dir +
                                     "' (a stream sent elsewhere with VRAMFLOW_TARGET, or inside a "
                                     "--stream checkpoint, must be copied into the directory first)");
    if (has_stream && has_pages && !options.force)
      return Status::AlreadyExists(where + ": '" + options.dir + "/" + plan.gpu.pages +
                                   "' exists (use --force to replace it)");
    plan.gpu.written = has_stream;
    plans->push_back(std::move(plan));
  }
  return Status::Ok();
}

// A file being written under a hidden temporary name in a directory; removed
// unless Publish() moved it to its final name (or by `cleanup` if the process
// is interrupted). The name carries this process's owner tag, so that the
// next export in the directory removes it if a SIGKILL left it behind.
constexpr char kExportMarker[] = ".vf-export-";
class TempFile {
 public:
  static Result<TempFile> Create(const std::string& dir, const std::string& final_name, CleanupRegistry* cleanup) {
    TempFile t;
    t.dir_ = dir;
    t.final_name_ = final_name;
    std::string pattern = dir + "/." + final_name + kExportMarker + OwnerTag() + "-XXXXXX";
    // Created and registered in one step: an interrupt removes it, or it was
    // never created. (mkostemp picks the name, so the undo reads it then.)
    auto name = std::make_shared<std::string>();
    VF_ASSIGN_OR_RETURN(t.entry_, CleanupEntry::Create(
                                      cleanup,
                                      [&] {
                                        t.fd_.Reset(::mkostemp(pattern.data(), O_CLOEXEC));
                                        if (!t.fd_.valid())
                                          return Status::FromErrno(
                                              "creating a temporary file for '" + dir + "/" + final_name + "'", errno);
                                        *name = pattern;
                                        return Status::Ok();
                                      },
                                      [name] { ::unlink(name->c_str()); }));
    t.path_ = pattern;
    return t;
  }
  TempFile() = default;
  TempFile(TempFile&& other) noexcept
      : dir_(std::move(other.dir_)),
        final_name_(std::move(other.final_name_)),
        path_(std::exchange(other.path_, std::string())),
        fd_(std::move(other.fd_)),
        entry_(std::move(other.entry_)) {}
  TempFile& operator=(TempFile&&) = delete;
  TempFile(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());  // best effort: an error path is already being reported
  }

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  // Syncs the contents and closes the file.
  Status Finish() {
    if (::fsync(fd_.get()) != 0) return Status::FromErrno("syncing '" + path_ + "'", errno);
    fd_.Reset();
    return Status::Ok();
  }
  // Moves the file to its final name; refuses to replace one unless `replace`.
  Status Publish(bool replace) {
    const std::string target = dir_ + "/" + final_name_;
    const int r = replace ? ::rename(path_.c_str(), target.c_str())
                          : ::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
    if (r != 0) {
      if (errno == EEXIST)
        return Status::AlreadyExists("'" + target + "' appeared meanwhile (use --force to replace it)");
      return Status::FromErrno("renaming '" + path_ + "' to '" + target + "'", errno);
    }
    path_.clear();
    return Status::Ok();
  }

 private:
  std::string dir_, final_name_, path_;
  UniqueFd fd_;
  CleanupEntry entry_;
};

Status PwriteAll(int fd, const uint8_t* data, size_t size, const std::string& what) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("writing " + what, errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Decodes one GPU's stream into `file` in upstream's pages layout (step 2).
Status WritePages(const ExportUpstreamOptions& options, const GpuPlan& plan, TempFile* file) {
  const std::string stream_path = options.dir + "/" + plan.gpu.stream;
  uint8_t header[kAmdgpuPagesHeaderSize];
  EncodeAmdgpuPagesHeader(plan.gpu.bytes, HostIsLittleEndian(), header);
  VF_RETURN_IF_ERROR(PwriteAll(file->fd(), header, sizeof header, "the size header of '" + file->path() + "'"));
  if (::ftruncate(file->fd(), static_cast<off_t>(kAmdgpuPagesHeaderSize + plan.gpu.bytes)) != 0)
    return Status::FromErrno("sizing '" + file->path() + "'", errno);

  // Each BO is a byte range of the file, in image order after the header.
  FileDevice device(plan.gpu.pages);
  std::vector<uint32_t> handles;
  uint64_t offset = kAmdgpuPagesHeaderSize;
  for (const VramBo& bo : plan.bos) {
    VF_ASSIGN_OR_RETURN(uint32_t handle, device.ImportFileRange(file->fd(), offset, bo.size,
                                                                plan.gpu.pages + " BO " + std::to_string(bo.index)));
    handles.push_back(handle);
    offset += bo.size;
  }
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> stream, OpenFileSource(stream_path));
  PipelineStats stats;
  VF_RETURN_IF_ERROR(RestoreVramInto(device, plan.bos, handles, *stream, options.pipeline, &stats, plan.dump_id)
                         .WithContext(plan.gpu.kfd_image + ", GPU " + Hex(plan.gpu.gpu_id)));
  return file->Finish();
}

Status SyncDirectory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return Status::FromErrno("syncing the directory '" + dir + "'", errno);
  return Status::Ok();
}

}  // namespace

Status RunExportUpstream(const ExportUpstreamOptions& options, ExportUpstreamReport* report) {
  *report = ExportUpstreamReport();
  VF_ASSIGN_OR_RETURN(std::vector<int> ids, ListKfdImages(options.dir));
  std::vector<GpuPlan> plans;
  for (int id : ids) VF_RETURN_IF_ERROR(PlanImage(options, id, &plans));

  (void)SweepDeadTemporaries(options.dir, kExportMarker);
  std::vector<TempFile> files;
  for (const GpuPlan& plan : plans) {
    if (!plan.gpu.written) continue;
    VF_ASSIGN_OR_RETURN(TempFile file, TempFile::Create(options.dir, plan.gpu.pages, options.cleanup));
    VF_RETURN_IF_ERROR(WritePages(options, plan, &file));
    files.push_back(std::move(file));
  }

  // An interrupt waits until every pages file is in place.
  auto publish = [&]() -> Status {
    size_t next_file = 0;
    for (const GpuPlan& plan : plans) {
      if (plan.gpu.written) VF_RETURN_IF_ERROR(files[next_file++].Publish(options.force));
      report->gpus.push_back(plan.gpu);
    }
    return Status::Ok();
  };
  VF_RETURN_IF_ERROR(options.cleanup ? options.cleanup->Exclusive(publish) : publish());
  VF_RETURN_IF_ERROR(SyncDirectory(options.dir));

  if (!options.remove_streams) return Status::Ok();
  for (const GpuPlan& plan : plans) {
    if (!plan.gpu.written) continue;
    const std::string path = options.dir + "/" + plan.gpu.stream;
    if (::unlink(path.c_str()) != 0) return Status::FromErrno("removing the converted stream '" + path + "'", errno);
    report->removed.push_back(plan.gpu.stream);
  }
  return SyncDirectory(options.dir);
}

}  // namespace vramflow
