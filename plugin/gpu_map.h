// SPDX-License-Identifier: MIT
// GPU remapping at restore: which local GPU takes over each checkpointed one.
//
// A checkpoint records the topology of the machine it was taken on (source);
// restore may run on another machine, or on the same one after a reboot
// renumbered its GPUs (destination). MapGpus assigns every source GPU a
// distinct destination GPU such that:
//
//  * the two GPUs are compatible: every property upstream's plugin compares
//    for equality is equal (the compute layout, SDMA and CP queue counts,
//    vendor and device ids, VRAM visibility), and each enabled MapChecks
//    check holds;
//  * XGMI hives stay whole: GPUs sharing a nonzero hive_id in the source land
//    in one destination hive, and different source hives in different ones;
//  * GPU-to-GPU links survive: where the source has a link from one GPU to
//    another, the destination has one between their images, XGMI where the
//    source's was XGMI. Checking each direction keeps a bidirectional pair
//    from turning unidirectional;
//  * with checks.numa, the source's NUMA nodes map one to one onto the
//    destination's, as upstream maps CPU nodes (amdgpu_plugin_topology.c,
//    map_device): GPUs that shared a NUMA node in the source share one in
//    the destination, and GPUs on different NUMA nodes stay on different
//    ones (two source NUMA nodes never fold into one). A GPU's NUMA node is
//    Topology::NumaNode; a source GPU with one needs a destination GPU with
//    one, a source GPU without one is unconstrained.
//
// The search places hive members first, then the rest, each time trying the
// GPUs here that fit and backtracking on a dead end; GPUs here that no rule
// tells apart are tried once. Pure functions: no state, thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "plugin/kfd/topology.h"

namespace vramflow {

// Checks that the user may switch off, through the environment variables of
// upstream's plugin (read by plugin/plugin_options.h). All default on.
struct MapChecks {
  bool fw_version = true;       // KFD_FW_VER_CHECK: source <= destination
  bool sdma_fw_version = true;  // KFD_SDMA_FW_VER_CHECK: source <= destination
  bool caches_count = true;     // KFD_CACHES_COUNT_CHECK: source <= destination
  bool num_gws = true;          // KFD_NUM_GWS_CHECK: source <= destination
  bool vram_size = true;        // KFD_VRAM_SIZE_CHECK: source <= destination
  bool numa = true;             // KFD_NUMA_CHECK: NUMA nodes map one to one
  bool capability = true;       // KFD_CAPABILITY_CHECK: equal
};

// Source gpu_id -> destination gpu_id, one entry per source GPU.
using GpuMap = std::map<uint32_t, uint32_t>;

// Maps every GPU of `source` onto a distinct GPU of `dest` (see the top of
// this file). Both must have the same number of GPUs. When no mapping
// exists, the InvalidArgument error says why: the GPU counts, the hive
// counts, the properties that rule out every candidate for the first source
// GPU that has none (with both values, and the variable that relaxes a
// switchable check), a group of source GPUs competing for too few candidates,
// or the hive, link or NUMA rule that no assignment satisfies.
Result<GpuMap> MapGpus(const Topology& source, const Topology& dest, const MapChecks& checks);

// Why `dest` cannot take `source`'s place, one entry per failed property,
// e.g. "simd_count 304 in the checkpoint, 228 here"; empty when compatible.
std::vector<std::string> GpuMismatches(const KfdNode& source, const KfdNode& dest, const MapChecks& checks);

}  // namespace vramflow
