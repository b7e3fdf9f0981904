// SPDX-License-Identifier: MIT
// KFD_NUMA_CHECK as upstream reads it (amdgpu_plugin_topology.c, map_device):
// the checkpoint's CPU (NUMA) nodes map one to one onto this machine's, so
// two NUMA nodes of the checkpoint never fold into one here.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "plugin/gpu_map.h"

namespace vramflow {
namespace {

// `numa_nodes` CPU nodes, then one identical GPU per entry of `gpus`
// (gpu_id, the CPU node it hangs off), linked to its CPU node over PCIe.
Topology Box(uint32_t numa_nodes, const std::vector<std::pair<uint32_t, uint32_t>>& gpus) {
  Topology t;
  for (uint32_t c = 0; c < numa_nodes; ++c) {
    KfdNode cpu;
    cpu.node_id = c;
    cpu.cpu_cores_count = 16;
    t.nodes.push_back(cpu);
  }
  for (const auto& [gpu_id, numa] : gpus) {
    KfdNode g;
    g.node_id = static_cast<uint32_t>(t.nodes.size());
    g.gpu_id = gpu_id;
    g.simd_count = 304;
    g.vendor_id = 4098;
    g.device_id = 29772;
    g.num_sdma_engines = 2;
    g.num_cp_queues = 24;
    g.vram_size = 16ull << 30;
    g.iolinks.push_back(IoLink{kIoLinkTypePcie, numa, g.node_id, 20, kIoLinkFlagEnabled});
    g.io_links_count = 1;
    t.nodes[numa].iolinks.push_back(IoLink{kIoLinkTypePcie, g.node_id, numa, 20, kIoLinkFlagEnabled});
    t.nodes.push_back(g);
  }
  return t;
}

std::string Message(const Result<GpuMap>& r) { return r.ok() ? "(mapped)" : r.status().message(); }

TEST(GpuMapNuma, TwoNumaNodesDoNotFoldIntoOne) {
  Topology src = Box(2, {{0x1, 0}, {0x2, 1}});  // one GPU per socket
  Topology dst = Box(2, {{0xa, 0}, {0xb, 0}});  // both GPUs on socket 0
  Result<GpuMap> on = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(on.ok());
  EXPECT_NE(Message(on).find("GPUs on different NUMA nodes on different ones"), std::string::npos) << Message(on);
  EXPECT_NE(Message(on).find("KFD_NUMA_CHECK=0 skips this check"), std::string::npos) << Message(on);
  MapChecks off;
  off.numa = false;
  EXPECT_TRUE(MapGpus(src, dst, off).ok());
}

TEST(GpuMapNuma, ThreeSocketsNeedThreeHere) {
  Topology src = Box(3, {{0x1, 0}, {0x2, 1}, {0x3, 2}});
  // Three CPU nodes here too, but the GPUs hang off two of them.
  Topology dst = Box(3, {{0xa, 0}, {0xb, 0}, {0xc, 1}});
  EXPECT_FALSE(MapGpus(src, dst, MapChecks{}).ok());
}

TEST(GpuMapNuma, MapsNumaNodesOneToOne) {
  // Socket 2's pair can only land on socket 0 here; sockets 0 and 1 then
  // take sockets 1 and 2, one each.
  Topology src = Box(3, {{0x1, 0}, {0x2, 1}, {0x3, 2}, {0x4, 2}});
  Topology dst = Box(3, {{0xa, 0}, {0xb, 0}, {0xc, 1}, {0xd, 2}});
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  std::map<uint32_t, uint32_t> numa_map;  // source NUMA -> destination NUMA
  std::set<uint32_t> used;
  for (const auto& [from, to] : *map) {
    uint32_t s = *src.NumaNode(*src.FindGpu(from));
    uint32_t d = *dst.NumaNode(*dst.FindGpu(to));
    auto [it, inserted] = numa_map.emplace(s, d);
    EXPECT_EQ(it->second, d) << "source NUMA node " << s << " split";
    if (inserted) {
      EXPECT_TRUE(used.insert(d).second) << "destination NUMA node " << d << " taken twice";
    }
  }
  EXPECT_EQ(numa_map.at(2), 0u);
}

}  // namespace
}  // namespace vramflow
