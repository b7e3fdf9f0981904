// SPDX-License-Identifier: MIT
#include "sim/kfd/sim_kfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/endian.h"
#include "common/hash.h"
#include "sim/gpu/sim_device.h"

namespace vramflow {

struct SimKfd::Bo {
  SimKfdBoInfo info;  // info.fd is memfd's number
  UniqueFd memfd;     // VRAM/GTT only
  BoMapping map;
};

struct SimKfd::Process {
  std::vector<KfdDevice> devices;            // user/actual gpu_id; drm_fd unused
  std::map<uint32_t, SimKfdFile> drm_files;  // restored: actual gpu_id -> the DRM file Restore was given
  std::vector<std::unique_ptr<Bo>> bos;
  SimKfdProcessState state = SimKfdProcessState::kRunning;
};

namespace {

constexpr uint64_t kPageSize = 4096;
// KFD's mmap offsets for doorbell and MMIO pages (kfd_priv.h): the type in
// bits 62-63, the gpu_id in bits 46-61.
constexpr uint64_t kMmapTypeDoorbell = uint64_t{3} << 62;
constexpr uint64_t kMmapTypeMmio = uint64_t{0} << 62;
constexpr int kMmapGpuIdShift = 46;
constexpr uint64_t kMmapGpuIdMask = ((uint64_t{1} << 16) - 1) << kMmapGpuIdShift;
// DRM hands out GEM mmap offsets from 4 GiB up (DRM_FILE_PAGE_OFFSET_START).
constexpr uint64_t kGemOffsetStart = uint64_t{1} << 32;
constexpr uint32_t kBoTypeMask = kKfdBoVram | kKfdBoGtt | kKfdBoUserptr | kKfdBoDoorbell | kKfdBoMmioRemap;

// The private data, opaque to user space; little-endian:
//   header   magic u64, version u32, num_devices u32, num_bos u32, num_objects u32
//   devices  user_gpu_id u32, reserved u32           (ascending gpu_id: the kernel matches by id)
//   bos      addr u64, size u64, alloc_flags u32, user gpu_id u32   (bucket order)
//   objects  type u32, index u32, user gpu_id u32, reserved u32, addr u64, state 40 bytes
// Objects are one queue per DOORBELL BO and one event page, their "state"
// (MQD, control stack) hashed from the BO list: all of it follows from the
// buckets, so Restore regenerates it and compares.
constexpr uint64_t kPrivMagic = 0x44464b4d49534656;  // "VFSIMKFD"
constexpr uint32_t kPrivVersion = 1;
constexpr size_t kPrivHeaderSize = 24;
constexpr size_t kPrivDeviceSize = 8;
constexpr size_t kPrivBoSize = 24;
constexpr size_t kPrivObjectSize = 64;
constexpr uint32_t kObjectQueue = 1;
constexpr uint32_t kObjectEvents = 2;

struct PrivBo {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t alloc_flags = 0;
  uint32_t gpu_id = 0;  // user
};

uint32_t CountObjects(const std::vector<PrivBo>& bos) {
  uint32_t queues = 0;
  for (const PrivBo& bo : bos) queues += (bo.alloc_flags & kKfdBoDoorbell) ? 1 : 0;
  return queues + 1;
}

uint64_t PrivDataSize(size_t devices, size_t bos, uint32_t objects) {
  return kPrivHeaderSize + devices * kPrivDeviceSize + bos * kPrivBoSize + uint64_t{objects} * kPrivObjectSize;
}

uint64_t HashWords(std::initializer_list<uint64_t> words) {
  std::vector<uint8_t> bytes(words.size() * 8);
  size_t at = 0;
  for (uint64_t w : words) StoreLE64(bytes.data() + 8 * at++, w);
  return Hash64(bytes.data(), bytes.size());
}

void PutObject(uint8_t* p, uint32_t type, uint32_t index, uint32_t gpu_id, uint64_t addr, uint64_t seed) {
  StoreLE32(p, type);
  StoreLE32(p + 4, index);
  StoreLE32(p + 8, gpu_id);
  StoreLE32(p + 12, 0);
  StoreLE64(p + 16, addr);
  for (uint64_t k = 0; k < 5; ++k) StoreLE64(p + 24 + 8 * k, HashWords({seed, type, index, gpu_id, addr, k}));
}

std::vector<uint8_t> EncodePrivData(std::vector<uint32_t> user_gpu_ids, const std::vector<PrivBo>& bos) {
  std::sort(user_gpu_ids.begin(), user_gpu_ids.end());
  const uint32_t objects = CountObjects(bos);
  std::vector<uint8_t> out(PrivDataSize(user_gpu_ids.size(), bos.size(), objects));
  uint8_t* p = out.data();
  StoreLE64(p, kPrivMagic);
  StoreLE32(p + 8, kPrivVersion);
  StoreLE32(p + 12, static_cast<uint32_t>(user_gpu_ids.size()));
  StoreLE32(p + 16, static_cast<uint32_t>(bos.size()));
  StoreLE32(p + 20, objects);
  p += kPrivHeaderSize;
  for (uint32_t id : user_gpu_ids) {
    StoreLE32(p, id);
    StoreLE32(p + 4, 0);
    p += kPrivDeviceSize;
  }
  for (const PrivBo& bo : bos) {
    StoreLE64(p, bo.addr);
    StoreLE64(p + 8, bo.size);
    StoreLE32(p + 16, bo.alloc_flags);
    StoreLE32(p + 20, bo.gpu_id);
    p += kPrivBoSize;
  }
  uint32_t queue = 0;
  for (const PrivBo& bo : bos) {
    if (!(bo.alloc_flags & kKfdBoDoorbell)) continue;
    PutObject(p, kObjectQueue, queue++, bo.gpu_id, bo.addr, bo.size);
    p += kPrivObjectSize;
  }
  PutObject(p, kObjectEvents, 0, 0, 0, bos.size());
  return out;
}

std::string HexId(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status KfdError(const std::string& op, int err, const std::string& why) {
  return Status::FromErrno("simulated KFD " + op + ": " + why, err);
}

// A new file on the memory of `memfd`, as KFD exports a dma-buf: its own
// file (offset, flags), the same pages.
Result<UniqueFd> ExportDmabuf(int memfd) {
  UniqueFd fd(::open(("/proc/self/fd/" + std::to_string(memfd)).c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) fd.Reset(::fcntl(memfd, F_DUPFD_CLOEXEC, 0));  // no /proc: a dup shares the memory too
  if (!fd.valid()) return Status::FromErrno("exporting a simulated dma-buf", errno);
  return fd;
}

Topology BuildTopology(const SimKfdOptions& o) {
  const uint32_t kLinkFlags = kIoLinkFlagEnabled | kIoLinkFlagBidirectional;
  Topology t;
  KfdNode cpu;
  cpu.node_id = 0;
  cpu.cpu_cores_count = 64;
  cpu.mem_banks_count = 1;
  for (uint32_t i = 0; i < o.gpus; ++i) cpu.iolinks.push_back(IoLink{kIoLinkTypePcie, i + 1, 0, 20, kLinkFlags});
  cpu.io_links_count = static_cast<uint32_t>(cpu.iolinks.size());
  t.nodes.push_back(cpu);
  for (uint32_t i = 0; i < o.gpus; ++i) {
    KfdNode g = o.gpu_properties;
    g.node_id = i + 1;
    g.gpu_id = o.first_gpu_id + i * o.gpu_id_stride;
    g.drm_render_minor = o.first_render_minor + i;
    g.hive_id = o.xgmi_hive_id;
    g.cpu_cores_count = 0;
    g.mem_banks_count = 1;
    g.iolinks = {IoLink{kIoLinkTypePcie, 0, i + 1, 20, kLinkFlags}};
    for (uint32_t j = 0; o.xgmi_hive_id != 0 && j < o.gpus; ++j) {
      if (j != i) g.iolinks.push_back(IoLink{kIoLinkTypeXgmi, j + 1, i + 1, 15, kLinkFlags});
    }
    g.io_links_count = static_cast<uint32_t>(g.iolinks.size());
    t.nodes.push_back(std::move(g));
  }
  return t;
}

Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Status::IoError("creating " + path.parent_path().string() + ": " + ec.message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError("writing " + path.string());
  return Status::Ok();
}

Status WriteNode(const std::filesystem::path& root, const KfdNode& n) {
  const std::filesystem::path dir = root / "nodes" / std::to_string(n.node_id);
  VF_RETURN_IF_ERROR(WriteText(dir / "gpu_id", std::to_string(n.gpu_id) + "\n"));
  std::string props;
  for (const KfdNodeProperty& k : KfdNodeProperties())
    props += std::string(k.key) + " " + std::to_string(n.*k.field) + "\n";
  props += "hive_id " + std::to_string(n.hive_id) + "\n";
  // Keys vramflow does not read, as the kernel prints them.
  props += "gfx_target_version " + std::string(n.is_gpu() ? "90010" : "0") + "\n";
  props += "location_id " + std::to_string(n.is_gpu() ? 0x100 * n.node_id : 0) + "\n";
  VF_RETURN_IF_ERROR(WriteText(dir / "properties", props));
  const uint32_t heap = !n.is_gpu() ? kHeapTypeSystem : n.vram_public ? kHeapTypeFbPublic : kHeapTypeFbPrivate;
  const uint64_t bank_size = n.is_gpu() ? n.vram_size : uint64_t{256} << 30;
  VF_RETURN_IF_ERROR(WriteText(dir / "mem_banks" / "0" / "properties",
                               "heap_type " + std::to_string(heap) + "\nsize_in_bytes " + std::to_string(bank_size) +
                                   "\nflags 0\nwidth 4096\nmem_clk_max 1600\n"));
  for (size_t k = 0; k < n.iolinks.size(); ++k) {
    const IoLink& l = n.iolinks[k];
    VF_RETURN_IF_ERROR(WriteText(dir / "io_links" / std::to_string(k) / "properties",
                                 "type " + std::to_string(l.type) + "\nversion_major 0\nversion_minor 0\nnode_from " +
                                     std::to_string(l.node_from) + "\nnode_to " + std::to_string(l.node_to_id) +
                                     "\nweight " + std::to_string(l.weight) +
                                     "\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\nmax_bandwidth 64000\n" +
                                     "recommended_transfer_size 0\nflags " + std::to_string(l.flags) + "\n"));
  }
  return Status::Ok();
}

std::vector<PrivBo> PrivBosOf(const std::vector<KfdBo>& buckets) {
  std::vector<PrivBo> out;
  for (const KfdBo& b : buckets) out.push_back(PrivBo{b.addr, b.size, b.alloc_flags, b.gpu_id});
  return out;
}

// Checks KfdCheckpoint's private data against its buckets, as the kernel
// parses it during CRIU_OP_RESTORE.
Status CheckPrivData(const std::string& op, const KfdCheckpoint& state) {
  const std::vector<uint8_t>& priv = state.priv_data;
  if (priv.size() < kPrivHeaderSize || LoadLE64(priv.data()) != kPrivMagic) {
    return KfdError(op, EINVAL, "private data is not a checkpoint of this KFD (bad magic or too short)");
  }
  if (LoadLE32(priv.data() + 8) != kPrivVersion) return KfdError(op, EINVAL, "private data version unknown");
  const uint32_t devices = LoadLE32(priv.data() + 12), bos = LoadLE32(priv.data() + 16),
                 objects = LoadLE32(priv.data() + 20);
  if (devices != state.devices.size() || bos != state.bos.size() || objects != state.num_objects) {
    return KfdError(op, EINVAL,
                    "private data describes " + std::to_string(devices) + " devices, " + std::to_string(bos) +
                        " BOs and " + std::to_string(objects) + " objects; the call has " +
                        std::to_string(state.devices.size()) + ", " + std::to_string(state.bos.size()) + " and " +
                        std::to_string(state.num_objects));
  }
  std::vector<uint32_t> user_ids;
  for (const KfdDevice& d : state.devices) user_ids.push_back(d.user_gpu_id);
  std::vector<uint8_t> expected = EncodePrivData(user_ids, PrivBosOf(state.bos));
  if (priv.size() != expected.size()) {
    return KfdError(
        op, EINVAL,
        "private data has " + std::to_string(priv.size()) + " bytes, not " + std::to_string(expected.size()));
  }
  auto diff = std::mismatch(priv.begin(), priv.end(), expected.begin());
  if (diff.first != priv.end()) {
    return KfdError(op, EINVAL,
                    "private data byte " + std::to_string(diff.first - priv.begin()) +
                        " does not match the devices and BO buckets (corrupted)");
  }
  return Status::Ok();
}

uint64_t RoundUpPage(uint64_t v) { return (v + kPageSize - 1) / kPageSize * kPageSize; }

}  // namespace

KfdNode SimGpuProperties() {
  KfdNode n;  // an MI210
  n.simd_count = 416;
  n.mem_banks_count = 1;
  n.caches_count = 266;
  n.max_waves_per_simd = 8;
  n.lds_size_in_kb = 64;
  n.num_gws = 64;
  n.wave_front_size = 64;
  n.array_count = 8;
  n.simd_arrays_per_engine = 1;
  n.cu_per_simd_array = 13;
  n.simd_per_cu = 4;
  n.max_slots_scratch_cu = 32;
  n.vendor_id = 0x1002;
  n.device_id = 0x740f;
  n.num_sdma_engines = 2;
  n.num_sdma_xgmi_engines = 3;
  n.num_sdma_queues_per_engine = 8;
  n.num_cp_queues = 24;
  n.fw_version = 78;
  n.capability = 0x2c802280;
  n.sdma_fw_version = 8;
  n.vram_public = true;
  n.vram_size = uint64_t{64} << 30;
  return n;
}

// KfdOps over a SimKfd: each call takes the machine's lock.
class SimKfd::OpsImpl final : public KfdOps {
 public:
  explicit OpsImpl(SimKfd* kfd) : kfd_(kfd) {}

  Status GetVersion(uint32_t* major, uint32_t* minor) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->GetVersionLocked(major, minor);
  }
  Result<KfdProcessInfo> ProcessInfo(int kfd_fd, pid_t pid) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->ProcessInfoLocked(kfd_fd, pid);
  }
  Result<KfdCheckpoint> Checkpoint(int kfd_fd, const KfdProcessInfo& info) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->CheckpointLocked(kfd_fd, info);
  }
  Status Unpause(int kfd_fd) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->UnpauseLocked(kfd_fd);
  }
  Status Restore(int kfd_fd, KfdCheckpoint* state) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->RestoreLocked(kfd_fd, state);
  }
  Status Resume(int kfd_fd, pid_t pid) override {
    std::lock_guard lock(kfd_->mu_);
    return kfd_->ResumeLocked(kfd_fd, pid);
  }

 private:
  SimKfd* kfd_;
};

SimKfd::SimKfd(SimKfdOptions options)
    : options_(std::move(options)),
      topology_(BuildTopology(options_)),
      next_gem_offset_(kGemOffsetStart),
      kfd_major_(options_.kfd_major),
      kfd_minor_(options_.kfd_minor) {}

SimKfd::~SimKfd() = default;

std::vector<uint32_t> SimKfd::GpuIds() const {
  std::vector<uint32_t> ids;
  for (const KfdNode* n : topology_.gpus()) ids.push_back(n->gpu_id);
  return ids;
}

Result<Topology> SimKfd::MachineTopology() const { return topology_; }

Status SimKfd::WriteSysfsTopology(const std::string& root) const {
  for (const KfdNode& n : topology_.nodes) {
    Status s = WriteNode(root, n);
    if (!s.ok()) return s.WithContext("simulated KFD topology");
  }
  return Status::Ok();
}

const KfdNode* SimKfd::FindGpuNode(uint32_t gpu_id) const { return topology_.FindGpu(gpu_id); }

uint64_t SimKfd::MmapOffset(uint32_t alloc_flags, uint32_t gpu_id, uint64_t addr, uint64_t size) {
  const uint64_t gpu_bits = (uint64_t{gpu_id} << kMmapGpuIdShift) & kMmapGpuIdMask;
  if (alloc_flags & kKfdBoDoorbell) return kMmapTypeDoorbell | gpu_bits;
  if (alloc_flags & kKfdBoMmioRemap) return kMmapTypeMmio | gpu_bits;
  if (alloc_flags & kKfdBoUserptr) return addr;  // KFD reports the user address
  const uint64_t offset = next_gem_offset_;
  next_gem_offset_ += std::max(RoundUpPage(size), kPageSize);
  return offset;
}

Result<std::unique_ptr<SimKfd::Bo>> SimKfd::CreateBo(pid_t pid, const SimKfdBoSpec& spec, uint32_t user_gpu_id) {
  auto bo = std::make_unique<Bo>();
  bo->info.addr = spec.addr;
  bo->info.size = spec.size;
  bo->info.alloc_flags = spec.alloc_flags;
  bo->info.gpu_id = spec.gpu_id;
  bo->info.user_gpu_id = user_gpu_id;
  bo->info.offset = MmapOffset(spec.alloc_flags, spec.gpu_id, spec.addr, spec.size);
  if (KfdBoHasContents(spec.alloc_flags)) {
    VF_ASSIGN_OR_RETURN(bo->memfd, CreateSimBo("kfd-" + std::to_string(pid) + "-" + HexId(spec.addr), spec.size));
    VF_ASSIGN_OR_RETURN(bo->map, BoMapping::Map(bo->memfd.get(), spec.size));
    bo->info.fd = bo->memfd.get();
  }
  return bo;
}

Status SimKfd::AddProcess(pid_t pid, std::vector<SimKfdBoSpec> bos) { return AddProcess(pid, std::move(bos), {}); }

Status SimKfd::AddProcess(pid_t pid, std::vector<SimKfdBoSpec> bos, std::vector<uint32_t> gpu_ids) {
  const std::string where = "simulated KFD process " + std::to_string(pid);
  if (gpu_ids.empty()) gpu_ids = GpuIds();
  std::lock_guard lock(mu_);
  if (pid <= 0) return Status::InvalidArgument(where + ": pid must be positive");
  if (processes_.count(pid)) return Status::AlreadyExists(where + " exists");
  auto process = std::make_unique<Process>();
  std::set<uint32_t> gpus;
  for (uint32_t id : gpu_ids) {
    if (!FindGpuNode(id)) return Status::InvalidArgument(where + ": no GPU " + HexId(id) + " on this machine");
    if (!gpus.insert(id).second) return Status::InvalidArgument(where + ": GPU " + HexId(id) + " listed twice");
    process->devices.push_back(KfdDevice{id, id, kKfdNoFd});
  }
  std::map<uint32_t, std::map<uint64_t, uint64_t>> ranges;  // gpu -> addr -> end
  for (size_t i = 0; i < bos.size(); ++i) {
    const SimKfdBoSpec& b = bos[i];
    const std::string bo = where + " BO " + std::to_string(i);
    const uint32_t type = b.alloc_flags & kBoTypeMask;
    if (type == 0 || (type & (type - 1)) != 0) {
      return Status::InvalidArgument(bo + ": alloc_flags " + HexId(b.alloc_flags) + " must name one BO type");
    }
    if (b.size == 0 || b.addr % kPageSize != 0 || b.addr + b.size < b.addr) {
      return Status::InvalidArgument(bo + ": needs a page-aligned address and a size");
    }
    if (!gpus.count(b.gpu_id)) {
      return Status::InvalidArgument(bo + ": GPU " + HexId(b.gpu_id) + " is not the process's");
    }
    auto& on_gpu = ranges[b.gpu_id];
    auto next = on_gpu.lower_bound(b.addr);
    bool overlaps = (next != on_gpu.end() && next->first < b.addr + b.size) ||
                    (next != on_gpu.begin() && std::prev(next)->second > b.addr);
    if (overlaps) return Status::InvalidArgument(bo + ": overlaps another BO's GPU addresses");
    on_gpu[b.addr] = b.addr + b.size;
  }
  for (const SimKfdBoSpec& b : bos) {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<Bo> bo, CreateBo(pid, b, b.gpu_id));
    process->bos.push_back(std::move(bo));
  }
  processes_[pid] = std::move(process);
  return Status::Ok();
}

Status SimKfd::ShareBo(pid_t exporter, size_t index, pid_t importer, uint64_t addr) {
  const std::string where = "simulated KFD ShareBo";
  std::lock_guard lock(mu_);
  auto from = processes_.find(exporter), to = processes_.find(importer);
  if (from == processes_.end() || to == processes_.end() || exporter == importer)
    return Status::InvalidArgument(where + ": needs two processes with KFD state");
  if (index >= from->second->bos.size() || !from->second->bos[index]->memfd.valid())
    return Status::InvalidArgument(where + ": process " + std::to_string(exporter) + " has no VRAM/GTT BO " +
                                   std::to_string(index));
  const Bo& shared = *from->second->bos[index];
  const KfdDevice* device = nullptr;
  for (const KfdDevice& d : to->second->devices)
    if (d.actual_gpu_id == shared.info.gpu_id) device = &d;
  if (!device || addr % kPageSize != 0)
    return Status::InvalidArgument(where + ": process " + std::to_string(importer) +
                                   " does not use the BO's GPU, or the address is not page-aligned");
  auto bo = std::make_unique<Bo>();
  bo->info = shared.info;
  bo->info.addr = addr;
  bo->info.user_gpu_id = device->user_gpu_id;
  bo->info.offset = MmapOffset(shared.info.alloc_flags, shared.info.gpu_id, addr, shared.info.size);
  bo->memfd.Reset(::fcntl(shared.memfd.get(), F_DUPFD_CLOEXEC, 0));  // the same memory
  if (!bo->memfd.valid()) return Status::FromErrno(where, errno);
  VF_ASSIGN_OR_RETURN(bo->map, BoMapping::Map(bo->memfd.get(), bo->info.size));
  bo->info.fd = bo->memfd.get();
  to->second->bos.push_back(std::move(bo));
  return Status::Ok();
}

Status SimKfd::RemoveProcess(pid_t pid) {
  std::lock_guard lock(mu_);
  if (processes_.erase(pid) == 0) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  return Status::Ok();
}

bool SimKfd::HasProcess(pid_t pid) const {
  std::lock_guard lock(mu_);
  return processes_.count(pid) != 0;
}

Result<SimKfdProcessState> SimKfd::ProcessState(pid_t pid) const {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  return it->second->state;
}

Result<std::vector<KfdDevice>> SimKfd::ProcessDevices(pid_t pid) const {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  return it->second->devices;
}

Result<SimKfdFile> SimKfd::RestoreDrmFile(pid_t pid, uint32_t gpu_id) const {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  auto file = it->second->drm_files.find(gpu_id);
  if (file == it->second->drm_files.end())
    return Status::InvalidArgument("simulated KFD: process " + std::to_string(pid) +
                                   " was not restored with a DRM file for GPU " + HexId(gpu_id));
  return file->second;
}

Result<std::vector<SimKfdBoInfo>> SimKfd::Bos(pid_t pid) const {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  std::vector<SimKfdBoInfo> out;
  for (const auto& bo : it->second->bos) out.push_back(bo->info);
  return out;
}

Result<std::span<uint8_t>> SimKfd::BoBytes(pid_t pid, size_t index) {
  std::lock_guard lock(mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return Status::InvalidArgument("simulated KFD: no process " + std::to_string(pid));
  if (index >= it->second->bos.size()) {
    return Status::InvalidArgument("simulated KFD process " + std::to_string(pid) + " has no BO " +
                                   std::to_string(index));
  }
  const Bo& bo = *it->second->bos[index];
  if (!bo.memfd.valid()) {
    return Status::InvalidArgument("simulated KFD process " + std::to_string(pid) + " BO " + std::to_string(index) +
                                   " is neither VRAM nor GTT: it has no contents");
  }
  return std::span<uint8_t>(bo.map.data(), bo.map.size());
}

Status SimKfd::RegisterFileLocked(int fd, const std::string& name, OpenFile file) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("simulated KFD: fstat of " + name, errno);
  file.keepalive.Reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!file.keepalive.valid()) return Status::FromErrno("simulated KFD: dup of " + name, errno);
  files_[FileKey{st.st_dev, st.st_ino}] = std::move(file);
  return Status::Ok();
}

Result<UniqueFd> SimKfd::OpenFileLocked(const std::string& name, OpenFile file) {
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("simulated KFD: creating " + name, errno);
  VF_RETURN_IF_ERROR(RegisterFileLocked(fd.get(), name, std::move(file)));
  return fd;
}

Result<UniqueFd> SimKfd::OpenNodeLocked(const std::string& prefix, OpenFile file) {
  // Each file its own node, so that its inode names its process or GPU as
  // a memfd's does.
  const std::string path =
      options_.kfd_node_dir + "/" + prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(nodes_made_++);
  if (::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(10, 237)) != 0)
    return Status::FromErrno("simulated KFD: making the device node " + path, errno);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("simulated KFD: opening " + path, errno);
  VF_RETURN_IF_ERROR(RegisterFileLocked(fd.get(), path, std::move(file)));
  return fd;
}

Result<UniqueFd> SimKfd::OpenKfd(pid_t pid) {
  std::lock_guard lock(mu_);
  OpenFile file;
  file.kfd = true;
  file.pid = pid == 0 ? ::getpid() : pid;
  if (!options_.kfd_node_dir.empty()) return OpenNodeLocked("kfd", std::move(file));
  return OpenFileLocked("vramflow-sim-kfd", std::move(file));
}

Status SimKfd::AdoptKfdFile(pid_t pid, const std::string& path) {
  std::lock_guard lock(mu_);
  UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("simulated KFD: opening " + path, errno);
  OpenFile file;
  file.kfd = true;
  file.pid = pid;
  return RegisterFileLocked(fd.get(), path, std::move(file));
}

Result<UniqueFd> SimKfd::OpenRenderNode(uint32_t gpu_id) {
  std::lock_guard lock(mu_);
  const KfdNode* node = FindGpuNode(gpu_id);
  if (!node) return Status::FromErrno("simulated KFD: render node of GPU " + HexId(gpu_id), ENOENT);
  OpenFile file;
  file.gpu_id = gpu_id;
  const std::string name = "renderD" + std::to_string(node->drm_render_minor);
  if (!options_.kfd_node_dir.empty()) return OpenNodeLocked(name, std::move(file));
  return OpenFileLocked("vramflow-sim-" + name, std::move(file));
}

Result<uint32_t> SimKfd::RenderNodeGpu(int fd) const {
  std::lock_guard lock(mu_);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("simulated KFD: fd " + std::to_string(fd), errno);
  auto it = files_.find(FileKey{st.st_dev, st.st_ino});
  if (it == files_.end() || it->second.kfd) {
    return Status::InvalidArgument("simulated KFD: fd " + std::to_string(fd) + " is not a simulated render node");
  }
  return it->second.gpu_id;
}

Result<uint32_t> SimKfd::AddDrmBo(int render_fd, uint64_t size, bool imported) {
  std::lock_guard lock(mu_);
  struct stat st {};
  if (::fstat(render_fd, &st) != 0) return Status::FromErrno("simulated KFD AddDrmBo", errno);
  auto it = files_.find(FileKey{st.st_dev, st.st_ino});
  if (it == files_.end() || it->second.kfd)
    return Status::InvalidArgument("simulated KFD AddDrmBo: fd " + std::to_string(render_fd) + " is not a render node");
  std::vector<DrmBo>& bos = it->second.drm_bos;
  const uint32_t handle = bos.empty() ? 1 : bos.back().handle + 1;  // GEM handles count from 1 per file
  bos.push_back(DrmBo{handle, size, imported});
  return handle;
}

Result<std::vector<DrmBo>> SimKfd::ListDrmBos(int render_fd) const {
  std::lock_guard lock(mu_);
  if (!options_.gem_list_handles)  // what the real backend makes of the kernel's EINVAL
    return Status::NotSupported(
        "simulated kernel without AMDGPU_GEM_LIST_HANDLES: a render node's DRM BOs "
        "cannot be listed");
  struct stat st {};
  if (::fstat(render_fd, &st) != 0) return Status::FromErrno("simulated KFD ListDrmBos", errno);
  auto it = files_.find(FileKey{st.st_dev, st.st_ino});
  if (it == files_.end() || it->second.kfd) return KfdError("ListDrmBos", ENOTTY, "not a render node");
  return it->second.drm_bos;
}

GpuFileKind SimKfd::FileKind(uint64_t dev, uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(FileKey{dev, ino});
  if (it == files_.end()) return GpuFileKind::kNone;
  return it->second.kfd ? GpuFileKind::kKfd : GpuFileKind::kRenderNode;
}

uint32_t SimKfd::FileGpu(uint64_t dev, uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(FileKey{dev, ino});
  return (it == files_.end() || it->second.kfd) ? 0 : it->second.gpu_id;
}

std::unique_ptr<KfdOps> SimKfd::Ops() { return std::make_unique<OpsImpl>(this); }

void SimKfd::SetFaults(SimKfdFaults faults) {
  std::lock_guard lock(mu_);
  faults_ = std::move(faults);
  fault_op_calls_ = 0;
}

void SimKfd::SetVersion(uint32_t major, uint32_t minor) {
  std::lock_guard lock(mu_);
  kfd_major_ = major;
  kfd_minor_ = minor;
}

std::vector<std::string> SimKfd::CallLog() const {
  std::lock_guard lock(mu_);
  return log_;
}

void SimKfd::ClearCallLog() {
  std::lock_guard lock(mu_);
  log_.clear();
}

Status SimKfd::EnterOp(const std::string& op) {
  log_.push_back(op);
  if (faults_.fail_op == op && fault_op_calls_++ >= faults_.fail_after) {
    return KfdError(op, faults_.fail_errno, "injected fault");
  }
  return Status::Ok();
}

Result<pid_t> SimKfd::KfdFilePid(int fd, const std::string& op) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return KfdError(op, EBADF, "fd " + std::to_string(fd));
  auto it = files_.find(FileKey{st.st_dev, st.st_ino});
  if (it == files_.end() || !it->second.kfd) {
    return KfdError(op, ENOTTY, "fd " + std::to_string(fd) + " is not a simulated KFD file");
  }
  return it->second.pid;
}

Result<SimKfd::Process*> SimKfd::FindProcess(pid_t pid, const std::string& op) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return KfdError(op, ESRCH, "no KFD process with pid " + std::to_string(pid));
  return it->second.get();
}

Status SimKfd::CheckDrmFd(int drm_fd, uint32_t gpu_id) const {
  if (!options_.check_drm_fds) return Status::Ok();
  const std::string op = "Restore";
  struct stat st {};
  if (drm_fd < 0 || ::fstat(drm_fd, &st) != 0) {
    return KfdError(op, EBADF, "drm_fd " + std::to_string(drm_fd) + " of GPU " + HexId(gpu_id));
  }
  auto it = files_.find(FileKey{st.st_dev, st.st_ino});
  if (it == files_.end() || it->second.kfd || it->second.gpu_id != gpu_id) {
    return KfdError(op, EINVAL, "drm_fd " + std::to_string(drm_fd) + " is not the render node of GPU " + HexId(gpu_id));
  }
  return Status::Ok();
}

namespace {

// The private data's view of a process's BOs (a vector of unique_ptr<Bo>).
template <typename Bos>
std::vector<PrivBo> PrivBosOfProcess(const Bos& bos) {
  std::vector<PrivBo> out;
  for (const auto& bo : bos) {
    out.push_back(PrivBo{bo->info.addr, bo->info.size, bo->info.alloc_flags, bo->info.user_gpu_id});
  }
  return out;
}

// What ProcessInfo reports for a process with these devices and BOs.
KfdProcessInfo InfoOf(size_t devices, const std::vector<PrivBo>& bos) {
  KfdProcessInfo info;
  info.num_devices = static_cast<uint32_t>(devices);
  info.num_bos = static_cast<uint32_t>(bos.size());
  info.num_objects = CountObjects(bos);
  info.priv_data_size = PrivDataSize(devices, bos.size(), info.num_objects);
  return info;
}

}  // namespace

Status SimKfd::GetVersionLocked(uint32_t* major, uint32_t* minor) {
  VF_RETURN_IF_ERROR(EnterOp("GetVersion"));
  *major = kfd_major_;
  *minor = kfd_minor_;
  return Status::Ok();
}

Result<KfdProcessInfo> SimKfd::ProcessInfoLocked(int kfd_fd, pid_t pid) {
  const std::string op = "ProcessInfo";
  VF_RETURN_IF_ERROR(EnterOp(op));
  VF_ASSIGN_OR_RETURN(pid_t fd_pid, KfdFilePid(kfd_fd, op));
  if (pid != 0 && pid != fd_pid) {
    return KfdError(op, ESRCH,
                    "fd " + std::to_string(kfd_fd) + " is the KFD file of pid " + std::to_string(fd_pid) +
                        ", not of pid " + std::to_string(pid));
  }
  VF_ASSIGN_OR_RETURN(Process * p, FindProcess(fd_pid, op));
  if (p->state == SimKfdProcessState::kRestored) {
    return KfdError(op, EBUSY, "process " + std::to_string(fd_pid) + " is restored but not resumed");
  }
  p->state = SimKfdProcessState::kPaused;  // queues evicted until Unpause
  KfdProcessInfo info = InfoOf(p->devices.size(), PrivBosOfProcess(p->bos));
  info.pid = static_cast<uint32_t>(fd_pid);
  return info;
}

Result<KfdCheckpoint> SimKfd::CheckpointLocked(int kfd_fd, const KfdProcessInfo& info) {
  const std::string op = "Checkpoint";
  VF_RETURN_IF_ERROR(EnterOp(op));
  VF_ASSIGN_OR_RETURN(pid_t pid, KfdFilePid(kfd_fd, op));
  VF_ASSIGN_OR_RETURN(Process * p, FindProcess(pid, op));
  if (p->state != SimKfdProcessState::kPaused) {
    return KfdError(op, EINVAL, "process " + std::to_string(pid) + " is not paused (ProcessInfo comes first)");
  }
  KfdCheckpoint out;
  const std::vector<PrivBo> priv_bos = PrivBosOfProcess(p->bos);
  std::vector<uint32_t> user_ids;
  for (const KfdDevice& d : p->devices) {
    out.devices.push_back(KfdDevice{d.user_gpu_id, d.actual_gpu_id, kKfdNoFd});
    user_ids.push_back(d.user_gpu_id);
  }
  const KfdProcessInfo actual = InfoOf(p->devices.size(), priv_bos);
  if (info.num_devices != actual.num_devices || info.num_bos != actual.num_bos ||
      info.num_objects != actual.num_objects || info.priv_data_size != actual.priv_data_size) {
    return KfdError(op, EINVAL,
                    "counts (" + std::to_string(info.num_devices) + " devices, " + std::to_string(info.num_bos) +
                        " BOs, " + std::to_string(info.num_objects) + " objects, " +
                        std::to_string(info.priv_data_size) + " bytes of private data) are not the process's (" +
                        std::to_string(actual.num_devices) + ", " + std::to_string(actual.num_bos) + ", " +
                        std::to_string(actual.num_objects) + ", " + std::to_string(actual.priv_data_size) + ")");
  }
  out.priv_data = EncodePrivData(user_ids, priv_bos);
  out.num_objects = actual.num_objects;
  size_t count = p->bos.size();
  if (faults_.checkpoint_drops_last_bo && count > 0) --count;
  std::vector<UniqueFd> dmabufs;  // closed again if an export fails
  for (size_t i = 0; i < count; ++i) {
    const Bo& bo = *p->bos[i];
    KfdBo bucket;
    bucket.addr = bo.info.addr;
    bucket.size = bo.info.size;
    bucket.offset = bo.info.offset;
    bucket.gpu_id = bo.info.user_gpu_id;
    bucket.alloc_flags = bo.info.alloc_flags;
    if (bo.memfd.valid()) {
      Result<UniqueFd> fd = ExportDmabuf(bo.memfd.get());
      if (!fd.ok()) return fd.status().WithContext("simulated KFD " + op + " BO " + std::to_string(i));
      bucket.dmabuf_fd = fd->get();
      dmabufs.push_back(std::move(fd).value());
    }
    out.bos.push_back(bucket);
  }
  for (UniqueFd& fd : dmabufs) fd.Release();  // now the caller's
  return out;
}

Status SimKfd::UnpauseLocked(int kfd_fd) {
  const std::string op = "Unpause";
  VF_RETURN_IF_ERROR(EnterOp(op));
  VF_ASSIGN_OR_RETURN(pid_t pid, KfdFilePid(kfd_fd, op));
  VF_ASSIGN_OR_RETURN(Process * p, FindProcess(pid, op));
  if (p->state != SimKfdProcessState::kPaused) {
    return KfdError(op, EINVAL, "process " + std::to_string(pid) + " is not paused");
  }
  p->state = SimKfdProcessState::kRunning;
  return Status::Ok();
}

Status SimKfd::RestoreLocked(int kfd_fd, KfdCheckpoint* state) {
  const std::string op = "Restore";
  VF_RETURN_IF_ERROR(EnterOp(op));
  VF_ASSIGN_OR_RETURN(pid_t pid, KfdFilePid(kfd_fd, op));
  if (processes_.count(pid)) return KfdError(op, EINVAL, "pid " + std::to_string(pid) + " already has KFD state");
  if (state->devices.empty()) return KfdError(op, EINVAL, "no devices");
  std::map<uint32_t, uint32_t> user_to_actual;
  std::set<uint32_t> actual_ids;
  for (const KfdDevice& d : state->devices) {
    if (!FindGpuNode(d.actual_gpu_id)) {
      return KfdError(op, EINVAL, "no GPU " + HexId(d.actual_gpu_id) + " on this machine");
    }
    if (d.user_gpu_id == 0 || !user_to_actual.emplace(d.user_gpu_id, d.actual_gpu_id).second ||
        !actual_ids.insert(d.actual_gpu_id).second) {
      return KfdError(
          op, EINVAL,
          "device " + HexId(d.user_gpu_id) + " -> " + HexId(d.actual_gpu_id) + " is zero or repeats a gpu_id");
    }
    VF_RETURN_IF_ERROR(CheckDrmFd(d.drm_fd, d.actual_gpu_id));
  }
  VF_RETURN_IF_ERROR(CheckPrivData(op, *state));
  for (size_t i = 0; i < state->bos.size(); ++i) {
    const KfdBo& b = state->bos[i];
    if (!user_to_actual.count(b.gpu_id)) {
      return KfdError(op, EINVAL,
                      "BO " + std::to_string(i) + " is on GPU " + HexId(b.gpu_id) + ", none of the devices");
    }
    // New GEM offsets never reuse a dump-time one, so code that forgets to
    // remap offsets fails here as it would on another machine.
    if (KfdBoHasContents(b.alloc_flags) && b.offset >= kGemOffsetStart) {
      next_gem_offset_ = std::max(next_gem_offset_, RoundUpPage(b.offset + std::max<uint64_t>(b.size, 1)));
    }
  }
  auto process = std::make_unique<Process>();
  process->state = SimKfdProcessState::kRestored;
  for (const KfdDevice& d : state->devices) {
    process->devices.push_back(KfdDevice{d.user_gpu_id, d.actual_gpu_id, kKfdNoFd});
    struct stat st {};
    if (::fstat(d.drm_fd, &st) == 0) process->drm_files[d.actual_gpu_id] = SimKfdFile{st.st_dev, st.st_ino};
  }
  std::vector<UniqueFd> dmabufs(state->bos.size());
  for (size_t i = 0; i < state->bos.size(); ++i) {
    const KfdBo& b = state->bos[i];
    SimKfdBoSpec spec{b.addr, b.size, b.alloc_flags, user_to_actual[b.gpu_id]};
    Result<std::unique_ptr<Bo>> bo = CreateBo(pid, spec, b.gpu_id);
    if (!bo.ok()) return bo.status().WithContext("simulated KFD " + op + " BO " + std::to_string(i));
    if ((*bo)->memfd.valid()) {
      Result<UniqueFd> fd = ExportDmabuf((*bo)->memfd.get());
      if (!fd.ok()) return fd.status().WithContext("simulated KFD " + op + " BO " + std::to_string(i));
      dmabufs[i] = std::move(fd).value();
    }
    process->bos.push_back(std::move(bo).value());
  }
  for (size_t i = 0; i < state->bos.size(); ++i) {
    state->bos[i].restored_offset = process->bos[i]->info.offset;
    state->bos[i].dmabuf_fd = dmabufs[i].valid() ? dmabufs[i].Release() : kKfdNoFd;
  }
  processes_[pid] = std::move(process);
  return Status::Ok();
}

Status SimKfd::ResumeLocked(int kfd_fd, pid_t pid) {
  const std::string op = "Resume";
  VF_RETURN_IF_ERROR(EnterOp(op));
  VF_RETURN_IF_ERROR(KfdFilePid(kfd_fd, op).status());
  VF_ASSIGN_OR_RETURN(Process * p, FindProcess(pid, op));
  if (p->state != SimKfdProcessState::kRestored) {
    return KfdError(op, EINVAL, "process " + std::to_string(pid) + " is not a restored one waiting for Resume");
  }
  p->state = SimKfdProcessState::kRunning;
  return Status::Ok();
}

}  // namespace vramflow
