// SPDX-License-Identifier: MIT
// The topology a KFD image carries: KfdNode <-> kfd_device_entry.
//
// A dump records every node of the machine (GPUs under the gpu_id the
// process knows them by, CPU nodes as they are), as upstream's
// topology_to_devinfo does; restore rebuilds that topology from the image
// and maps it onto the local one (plugin/gpu_map.h). Only the fields the
// image has survive: of io_links, type and node_to_id.
//
// What is written follows upstream, so that either plugin reads the other's
// images: a GPU entry has cpu_cores_count 0 (upstream takes an entry with
// cores for a CPU node, so an APU's GPU would lose its properties), and only
// valid PCIe and XGMI io_links are kept (those to a node of the topology).
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "criu_amdgpu.pb.h"
#include "plugin/kfd/topology.h"

namespace vramflow {

// Writes `topology` into `kfd` (device_entries, num_of_gpus, num_of_cpus).
// `user_gpu_ids` maps a GPU's actual gpu_id to the one the process knows;
// GPUs not in it keep their own.
void TopologyToImage(const Topology& topology, const std::map<uint32_t, uint32_t>& user_gpu_ids, criu::CriuKfd* kfd);

// The topology an image was taken on. Corruption if the entry counts
// disagree with num_of_gpus/num_of_cpus or a gpu_id repeats.
Result<Topology> TopologyFromImage(const criu::CriuKfd& kfd, const std::string& what);

}  // namespace vramflow
