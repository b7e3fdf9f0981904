// SPDX-License-Identifier: MIT
// KFD topology: the GPUs and CPU nodes the amdkfd driver publishes in sysfs.
//
// The kernel describes every HSA agent as a numbered node under
// /sys/class/kfd/kfd/topology/nodes/<n>/:
//
//   gpu_id                    one number; 0 for a CPU-only node
//   properties                "key value" lines (simd_count 304, hive_id ...)
//   mem_banks/<k>/properties  heap_type, size_in_bytes, flags, width, mem_clk_max
//   io_links/<k>/properties   type, node_from, node_to, weight, flags, ...
//   caches/<k>/properties     (not read: only caches_count is compared)
//
// ParseTopology reads such a tree into plain structs. A checkpoint image stores
// the same data as kfd_device_entry messages (plugin/criu_amdgpu.proto), so
// KfdNode's field names are exactly the proto's, and converting one into the
// other is a field-by-field copy.
//
// Everything here is a value: no global state, no caching. Safe to use from
// any thread; a Topology is immutable once built.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace vramflow {

// Where the kernel publishes the topology; tests pass a fixture tree instead.
inline constexpr char kKfdTopologyRoot[] = "/sys/class/kfd/kfd/topology";

// io_links/<k>/properties "type": the CRAT IO interface type
// (drivers/gpu/drm/amd/amdkfd/kfd_crat.h, CRAT_IOLINK_TYPE_*).
inline constexpr uint32_t kIoLinkTypeHyperTransport = 1;
inline constexpr uint32_t kIoLinkTypePcie = 2;
inline constexpr uint32_t kIoLinkTypeXgmi = 11;

// io_links/<k>/properties "flags" (CRAT_IOLINK_FLAGS_*).
inline constexpr uint32_t kIoLinkFlagEnabled = 1u << 0;
inline constexpr uint32_t kIoLinkFlagBidirectional = 1u << 31;

// mem_banks/<k>/properties "heap_type" (kfd_topology.h, HSA_MEM_HEAP_TYPE_*).
// The kernel gives a GPU one bank holding all its VRAM: FB_PUBLIC when the
// whole of it is CPU-visible (large BAR), FB_PRIVATE otherwise.
inline constexpr uint32_t kHeapTypeSystem = 0;
inline constexpr uint32_t kHeapTypeFbPublic = 1;
inline constexpr uint32_t kHeapTypeFbPrivate = 2;

// One directed link from a node to another (io_links/<k>). `type` and
// `node_to_id` are what a checkpoint image keeps (dev_iolink); the rest comes
// only from sysfs and is 0 for a topology rebuilt from an image.
struct IoLink {
  uint32_t type = 0;        // kIoLinkType*
  uint32_t node_to_id = 0;  // sysfs "node_to"
  uint32_t node_from = 0;
  uint32_t weight = 0;  // relative cost; the direct CPU link is the lightest
  uint32_t flags = 0;   // kIoLinkFlag*

  bool operator==(const IoLink&) const = default;
};

// One node. Field names (and widths) follow kfd_device_entry in
// criu_amdgpu.proto; sysfs keys of the same name fill them. A key missing
// from `properties` (older kernels lack some) leaves its field 0.
struct KfdNode {
  uint32_t node_id = 0;  // the directory number under nodes/
  uint32_t gpu_id = 0;   // 0: CPU-only node
  uint32_t cpu_cores_count = 0;
  uint32_t simd_count = 0;
  uint32_t mem_banks_count = 0;
  uint32_t caches_count = 0;
  uint32_t io_links_count = 0;
  uint32_t max_waves_per_simd = 0;
  uint32_t lds_size_in_kb = 0;
  uint32_t gds_size_in_kb = 0;
  uint32_t num_gws = 0;
  uint32_t wave_front_size = 0;
  uint32_t array_count = 0;
  uint32_t simd_arrays_per_engine = 0;
  uint32_t cu_per_simd_array = 0;
  uint32_t simd_per_cu = 0;
  uint32_t max_slots_scratch_cu = 0;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t domain = 0;
  uint32_t drm_render_minor = 0;
  uint64_t hive_id = 0;  // XGMI hive; 0: in no hive
  uint32_t num_sdma_engines = 0;
  uint32_t num_sdma_xgmi_engines = 0;
  uint32_t num_sdma_queues_per_engine = 0;
  uint32_t num_cp_queues = 0;
  uint32_t fw_version = 0;
  uint32_t capability = 0;
  uint32_t sdma_fw_version = 0;
  // From mem_banks: whether any bank is FB_PUBLIC, and the bytes of all
  // FB_PUBLIC and FB_PRIVATE banks together (0 for a CPU node).
  bool vram_public = false;
  uint64_t vram_size = 0;
  std::vector<IoLink> iolinks;  // in io_links/<k> order

  bool is_gpu() const { return gpu_id != 0; }
  bool operator==(const KfdNode&) const = default;
};

struct Topology {
  std::vector<KfdNode> nodes;  // by ascending node_id

  std::vector<const KfdNode*> gpus() const;         // gpu_id != 0, by node_id
  std::vector<const KfdNode*> cpus() const;         // gpu_id == 0, by node_id
  const KfdNode* FindGpu(uint32_t gpu_id) const;    // nullptr if absent
  const KfdNode* FindNode(uint32_t node_id) const;  // nullptr if absent
  // The NUMA node of a GPU: the CPU node its lightest io_link leads to (the
  // kernel links each GPU directly to the CPU node of its PCIe root). Empty
  // when no link leads to a CPU node of this topology (an APU, or a topology
  // without its CPU nodes). A CPU node is its own NUMA node.
  std::optional<uint32_t> NumaNode(const KfdNode& node) const;
};

// The `properties` keys of KfdNode's 32-bit fields, by the kernel's names
// (also the proto's): what ParseTopology reads, and what a simulated KFD
// writes.
struct KfdNodeProperty {
  const char* key;
  uint32_t KfdNode::*field;
};
std::span<const KfdNodeProperty> KfdNodeProperties();

// Reads the topology under `root` (a directory holding nodes/). Nodes whose
// gpu_id is missing or unreadable (EPERM: hidden from this process by the
// device cgroup) are skipped, as upstream's plugin does; every other problem
// is an error naming the file and line under `root`, e.g.
// "nodes/2/properties line 5: 'simd_count x' is not a number". Unknown keys are
// ignored, so newer kernels parse.
Result<Topology> ParseTopology(const std::string& root = kKfdTopologyRoot);

// "GPU 0x1a2b (node 2)" / "CPU node 0", for messages.
std::string DescribeNode(const KfdNode& node);

}  // namespace vramflow
