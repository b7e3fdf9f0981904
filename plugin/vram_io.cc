// SPDX-License-Identifier: MIT
#include "plugin/vram_io.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "common/printable.h"
#include "common/units.h"
#include "plugin/kfd_file_list.h"
#include "streamer/format/amdgpu_pages.h"

namespace vramflow {
namespace {

// BOs imported into a device, released on destruction.
class ImportedBos {
 public:
  explicit ImportedBos(Device& device) : device_(device) {}
  ~ImportedBos() {
    for (uint32_t handle : handles_) (void)device_.ReleaseBo(handle);
  }
  ImportedBos(const ImportedBos&) = delete;
  ImportedBos& operator=(const ImportedBos&) = delete;

  Status Import(const std::vector<VramBo>& bos) {
    for (const VramBo& bo : bos) {
      Result<uint32_t> handle = device_.ImportBo(bo.dmabuf_fd, bo.size);
      if (!handle.ok())
        return handle.status().WithContext("importing BO " + std::to_string(bo.index) + " (" + Hex(bo.addr) + ", " +
                                           FormatSize(bo.size) + ") into " + device_.Describe());
      handles_.push_back(*handle);
    }
    return Status::Ok();
  }
  uint32_t handle(size_t i) const { return handles_[i]; }

 private:
  Device& device_;
  std::vector<uint32_t> handles_;
};

// Page-aligned host memory, as staging buffers must be.
struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using PageBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// A stream's object must belong to the dump `dump_id` (empty: images
// without an id, nothing to check).
Status CheckDumpId(const std::string& what, const ObjectMetadata& metadata, const std::string& dump_id) {
  if (dump_id.empty()) return Status::Ok();
  const std::string* found = metadata.Find(kDumpIdAttribute);
  if (!found)
    return Status::InvalidArgument(what + ": object '" + metadata.name + "' names no dump, but the images are of " +
                                   "dump " + dump_id + ", whose streams all name it: a stream of another dump or " +
                                   "tool; refused");
  if (*found != dump_id)
    return Status::InvalidArgument(what + " is of dump " + (IsDumpId(*found) ? *found : Printable(*found)) +
                                   ", but the images are of dump " + dump_id +
                                   ": a stream of another checkpoint; "
                                   "refused");
  return Status::Ok();
}

}  // namespace

std::string VramObjectName(uint32_t index) { return "bo-" + std::to_string(index); }

Status DumpVram(Device& device, uint32_t gpu_id, const std::vector<VramBo>& bos, ByteSink& sink,
                const PipelineOptions& options, PipelineStats* stats, const std::string& dump_id) {
  ImportedBos imported(device);
  VF_RETURN_IF_ERROR(imported.Import(bos));
  std::vector<DumpSource> sources;
  for (size_t i = 0; i < bos.size(); ++i) {
    DumpSource s;
    s.device = &device;
    s.bo = imported.handle(i);
    s.size = bos[i].size;
    s.metadata.name = VramObjectName(bos[i].index);
    s.metadata.attributes = {{"gpu-id", Hex(gpu_id)}, {"gpu-va", Hex(bos[i].addr)}};
    if (!dump_id.empty()) s.metadata.attributes.push_back({kDumpIdAttribute, dump_id});
    sources.push_back(std::move(s));
  }
  VF_RETURN_IF_ERROR(RunDump(sources, &sink, options, stats).WithContext(sink.Describe()));
  return sink.Commit().WithContext(sink.Describe());
}

Status RestoreVram(Device& device, const std::vector<VramBo>& bos, ByteSource& source, const PipelineOptions& options,
                   PipelineStats* stats, const std::string& dump_id) {
  ImportedBos imported(device);
  VF_RETURN_IF_ERROR(imported.Import(bos));
  std::vector<uint32_t> handles;
  for (size_t i = 0; i < bos.size(); ++i) handles.push_back(imported.handle(i));
  return RestoreVramInto(device, bos, handles, source, options, stats, dump_id);
}

Status RestoreVramInto(Device& device, const std::vector<VramBo>& bos, const std::vector<uint32_t>& handles,
                       ByteSource& source, const PipelineOptions& options, PipelineStats* stats,
                       const std::string& dump_id) {
  if (handles.size() != bos.size())
    return Status::Internal("RestoreVramInto: " + std::to_string(bos.size()) + " BOs but " +
                            std::to_string(handles.size()) + " handles");
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < bos.size(); ++i) by_name[VramObjectName(bos[i].index)] = i;
  std::vector<bool> begun(bos.size(), false), ended(bos.size(), false);
  const std::string what = source.Describe();

  RestoreResolver resolve = [&](const ObjectState& object) -> Result<RestoreTarget> {
    auto it = by_name.find(object.metadata.name);
    if (it == by_name.end())
      return Status::Corruption(what + ": object '" + object.metadata.name +
                                "' is not a BO of this GPU in the checkpoint's KFD image");
    if (begun[it->second]) return Status::Corruption(what + ": object '" + object.metadata.name + "' appears twice");
    VF_RETURN_IF_ERROR(CheckDumpId(what, object.metadata, dump_id));
    begun[it->second] = true;
    RestoreTarget target;
    target.device = &device;
    target.bo = handles[it->second];
    return target;
  };
  ObjectEndHook on_end = [&](const ObjectState& object) -> Status {
    size_t i = by_name.at(object.metadata.name);
    if (object.size != bos[i].size)
      return Status::Corruption(what + ": object '" + object.metadata.name + "' holds " + std::to_string(object.size) +
                                " bytes, but its BO is " + std::to_string(bos[i].size) + " bytes");
    ended[i] = true;
    return Status::Ok();
  };
  Status s = RunRestore(&source, {&device}, resolve, options, stats, on_end);
  if (!s.ok()) return s.WithContext(what);
  for (size_t i = 0; i < bos.size(); ++i) {
    if (!ended[i])
      return Status::Corruption(what + ": the stream ended without BO " + std::to_string(bos[i].index) + " (" +
                                VramObjectName(bos[i].index) + ", " + FormatSize(bos[i].size) + ")");
  }
  return Status::Ok();
}

Status RestoreRawPages(Device& device, const std::vector<VramBo>& bos, ByteSource& source,
                       const PipelineOptions& options) {
  const std::string what = source.Describe();
  uint64_t total = 0;
  for (const VramBo& bo : bos) total += bo.size;

  uint8_t header[kAmdgpuPagesHeaderSize];
  VF_ASSIGN_OR_RETURN(size_t got, ReadFully(source, header));
  if (got != sizeof header) return Status::Truncated(what + ": ends inside its 8-byte size header");
  const uint64_t declared = DecodeAmdgpuPagesHeader(header, HostIsLittleEndian());
  if (declared != total)
    return Status::Corruption(what + ": its header says " + std::to_string(declared) +
                              " bytes, but the KFD image's BOs of this GPU hold " + std::to_string(total));

  ImportedBos imported(device);
  VF_RETURN_IF_ERROR(imported.Import(bos));

  // Two staging buffers: one fills from the file while the other's copy runs.
  const size_t buffer_size = options.chunk_size;
  struct Staging {
    PageBuffer memory;
    uint32_t handle = 0;
    bool registered = false;
    std::optional<DmaFence> fence;
  };
  Staging staging[2];
  auto cleanup = [&] {
    for (Staging& st : staging) {
      if (st.fence) (void)device.WaitFence(*st.fence, options.dma_timeout);
      if (st.registered) (void)device.UnregisterStaging(st.handle);
    }
  };
  struct Guard {
    std::function<void()> fn;
    ~Guard() { fn(); }
  } guard{cleanup};
  for (Staging& st : staging) {
    st.memory.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, buffer_size)));
    if (!st.memory) return Status::IoError("out of memory for a " + FormatSize(buffer_size) + " staging buffer");
    VF_ASSIGN_OR_RETURN(st.handle, device.RegisterStaging(st.memory.get(), buffer_size));
    st.registered = true;
  }

  uint64_t position = kAmdgpuPagesHeaderSize;
  unsigned next = 0;
  for (size_t i = 0; i < bos.size(); ++i) {
    for (uint64_t offset = 0; offset < bos[i].size;) {
      Staging& st = staging[next];
      if (st.fence) {
        VF_RETURN_IF_ERROR(device.WaitFence(*st.fence, options.dma_timeout).WithContext(what));
        st.fence.reset();
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer_size, bos[i].size - offset));
      VF_ASSIGN_OR_RETURN(size_t read, ReadFully(source, std::span<uint8_t>(st.memory.get(), n)));
      if (read != n)
        return Status::Truncated(what + ": ends at byte " + std::to_string(position + read) + " inside BO " +
                                 std::to_string(bos[i].index) + "; the header promised " +
                                 std::to_string(kAmdgpuPagesHeaderSize + total));
      Result<DmaFence> fence = device.SubmitCopy(next % device.RingCount(), DmaDirection::kHostToDevice,
                                                 imported.handle(i), offset, st.handle, 0, n);
      if (!fence.ok()) return fence.status().WithContext(what + ", BO " + std::to_string(bos[i].index));
      st.fence = *fence;
      offset += n;
      position += n;
      next ^= 1;
    }
  }
  for (Staging& st : staging) {
    if (st.fence) {
      Status s = device.WaitFence(*st.fence, options.dma_timeout);
      st.fence.reset();
      VF_RETURN_IF_ERROR(s.WithContext(what));
    }
  }
  uint8_t extra;
  VF_ASSIGN_OR_RETURN(size_t more, source.Read(std::span<uint8_t>(&extra, 1)));
  if (more != 0) return Status::Corruption(what + ": bytes follow the last BO at byte " + std::to_string(position));
  return Status::Ok();
}

}  // namespace vramflow
