// SPDX-License-Identifier: MIT
#include "plugin/kfd/kfd_devinfo.h"

#include <algorithm>
#include <set>

namespace vramflow {
namespace {

// Every scalar field, in proto order: one list for both directions, so the
// two conversions cannot drift apart.
template <typename Fn>
void ForEachField(Fn&& fn) {
  using E = criu::KfdDeviceEntry;
  fn(&KfdNode::node_id, &E::node_id, &E::set_node_id);
  fn(&KfdNode::gpu_id, &E::gpu_id, &E::set_gpu_id);
  fn(&KfdNode::cpu_cores_count, &E::cpu_cores_count, &E::set_cpu_cores_count);
  fn(&KfdNode::simd_count, &E::simd_count, &E::set_simd_count);
  fn(&KfdNode::mem_banks_count, &E::mem_banks_count, &E::set_mem_banks_count);
  fn(&KfdNode::caches_count, &E::caches_count, &E::set_caches_count);
  fn(&KfdNode::io_links_count, &E::io_links_count, &E::set_io_links_count);
  fn(&KfdNode::max_waves_per_simd, &E::max_waves_per_simd, &E::set_max_waves_per_simd);
  fn(&KfdNode::lds_size_in_kb, &E::lds_size_in_kb, &E::set_lds_size_in_kb);
  fn(&KfdNode::gds_size_in_kb, &E::gds_size_in_kb, &E::set_gds_size_in_kb);
  fn(&KfdNode::num_gws, &E::num_gws, &E::set_num_gws);
  fn(&KfdNode::wave_front_size, &E::wave_front_size, &E::set_wave_front_size);
  fn(&KfdNode::array_count, &E::array_count, &E::set_array_count);
  fn(&KfdNode::simd_arrays_per_engine, &E::simd_arrays_per_engine, &E::set_simd_arrays_per_engine);
  fn(&KfdNode::cu_per_simd_array, &E::cu_per_simd_array, &E::set_cu_per_simd_array);
  fn(&KfdNode::simd_per_cu, &E::simd_per_cu, &E::set_simd_per_cu);
  fn(&KfdNode::max_slots_scratch_cu, &E::max_slots_scratch_cu, &E::set_max_slots_scratch_cu);
  fn(&KfdNode::vendor_id, &E::vendor_id, &E::set_vendor_id);
  fn(&KfdNode::device_id, &E::device_id, &E::set_device_id);
  fn(&KfdNode::domain, &E::domain, &E::set_domain);
  fn(&KfdNode::drm_render_minor, &E::drm_render_minor, &E::set_drm_render_minor);
  fn(&KfdNode::hive_id, &E::hive_id, &E::set_hive_id);
  fn(&KfdNode::num_sdma_engines, &E::num_sdma_engines, &E::set_num_sdma_engines);
  fn(&KfdNode::num_sdma_xgmi_engines, &E::num_sdma_xgmi_engines, &E::set_num_sdma_xgmi_engines);
  fn(&KfdNode::num_sdma_queues_per_engine, &E::num_sdma_queues_per_engine, &E::set_num_sdma_queues_per_engine);
  fn(&KfdNode::num_cp_queues, &E::num_cp_queues, &E::set_num_cp_queues);
  fn(&KfdNode::fw_version, &E::fw_version, &E::set_fw_version);
  fn(&KfdNode::capability, &E::capability, &E::set_capability);
  fn(&KfdNode::sdma_fw_version, &E::sdma_fw_version, &E::set_sdma_fw_version);
  fn(&KfdNode::vram_size, &E::vram_size, &E::set_vram_size);
}

// Whether upstream's topology_to_devinfo writes this link: it keeps only
// PCIe and XGMI links (parse_topo_node_iolinks drops the others) that are
// valid, i.e. lead to a node of the topology (topology_determine_iolinks:
// not, say, to a GPU the device cgroup hides).
bool LinkInImage(const Topology& topology, const IoLink& link) {
  const bool kept_type = link.type == kIoLinkTypePcie || link.type == kIoLinkTypeXgmi;
  return kept_type && topology.FindNode(link.node_to_id) != nullptr;
}

}  // namespace

void TopologyToImage(const Topology& topology, const std::map<uint32_t, uint32_t>& user_gpu_ids, criu::CriuKfd* kfd) {
  uint32_t gpus = 0, cpus = 0;
  for (const KfdNode& node : topology.nodes) {
    criu::KfdDeviceEntry* e = kfd->add_device_entries();
    ForEachField([&](auto node_field, auto, auto setter) { (e->*setter)(node.*node_field); });
    e->set_vram_public(node.vram_public ? 1 : 0);
    if (node.is_gpu()) {
      auto it = user_gpu_ids.find(node.gpu_id);
      if (it != user_gpu_ids.end()) e->set_gpu_id(it->second);
      // An APU's GPU node also counts the CPU cores it shares. Upstream's
      // devinfo_to_topology reads an entry with cpu_cores_count as a CPU
      // node (dropping every GPU property), and its topology_to_devinfo
      // leaves the field 0 for a GPU: so does this.
      e->set_cpu_cores_count(0);
      ++gpus;
    } else {
      ++cpus;
    }
    for (const IoLink& link : node.iolinks) {
      if (!LinkInImage(topology, link)) continue;
      criu::DevIolink* l = e->add_iolinks();
      l->set_type(link.type);
      l->set_node_to_id(link.node_to_id);
    }
  }
  kfd->set_num_of_gpus(gpus);
  kfd->set_num_of_cpus(cpus);
}

Result<Topology> TopologyFromImage(const criu::CriuKfd& kfd, const std::string& what) {
  Topology topology;
  std::set<uint32_t> gpu_ids, node_ids;
  uint32_t gpus = 0, cpus = 0;
  for (const criu::KfdDeviceEntry& e : kfd.device_entries()) {
    KfdNode node;
    ForEachField([&](auto node_field, auto getter, auto) { node.*node_field = (e.*getter)(); });
    node.vram_public = e.vram_public() != 0;
    for (const criu::DevIolink& l : e.iolinks()) {
      IoLink link;
      link.type = l.type();
      link.node_to_id = l.node_to_id();
      link.node_from = node.node_id;
      node.iolinks.push_back(link);
    }
    if (!node_ids.insert(node.node_id).second)
      return Status::Corruption(what + ": topology node " + std::to_string(node.node_id) + " appears twice");
    if (node.is_gpu()) {
      if (!gpu_ids.insert(node.gpu_id).second)
        return Status::Corruption(what + ": gpu_id " + std::to_string(node.gpu_id) + " appears twice");
      ++gpus;
    } else {
      ++cpus;
    }
    topology.nodes.push_back(std::move(node));
  }
  if (gpus != kfd.num_of_gpus() || cpus != kfd.num_of_cpus())
    return Status::Corruption(what + ": num_of_gpus " + std::to_string(kfd.num_of_gpus()) + " and num_of_cpus " +
                              std::to_string(kfd.num_of_cpus()) + " disagree with the " + std::to_string(gpus) +
                              " GPU and " + std::to_string(cpus) + " CPU entries");
  std::sort(topology.nodes.begin(), topology.nodes.end(),
            [](const KfdNode& a, const KfdNode& b) { return a.node_id < b.node_id; });
  return topology;
}

}  // namespace vramflow
