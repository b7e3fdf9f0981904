// SPDX-License-Identifier: MIT
// The topology in a criu_kfd image, written as upstream's topology_to_devinfo
// writes it (plugin/kfd/kfd_devinfo.h): upstream's devinfo_to_topology reads our
// images, and its rules decide what an entry may hold.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "plugin/kfd/kfd_devinfo.h"

namespace vramflow {
namespace {

KfdNode Cpu(uint32_t node_id, uint32_t cores) {
  KfdNode n;
  n.node_id = node_id;
  n.cpu_cores_count = cores;
  return n;
}

KfdNode Gpu(uint32_t node_id, uint32_t gpu_id) {
  KfdNode n;
  n.node_id = node_id;
  n.gpu_id = gpu_id;
  n.simd_count = 32;
  n.vendor_id = 4098;
  n.device_id = 5567;
  n.num_sdma_engines = 2;
  n.vram_size = 512ull << 20;
  return n;
}

std::vector<std::pair<uint32_t, uint32_t>> Links(const criu::KfdDeviceEntry& e) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const criu::DevIolink& l : e.iolinks()) out.emplace_back(l.type(), l.node_to_id());
  return out;
}

//! An APU's GPU node counts the CPU cores it shares; upstream would read an
//! entry with cpu_cores_count as a CPU node and drop its GPU properties.
TEST(KfdDevinfoUpstream, ApuGpuEntryHasNoCpuCores) {
  Topology apu;
  apu.nodes.push_back(Cpu(0, 16));
  KfdNode gpu = Gpu(1, 0x1111);
  gpu.cpu_cores_count = 16;
  apu.nodes.push_back(gpu);
  criu::CriuKfd image;
  TopologyToImage(apu, {{0x1111, 0x2222}}, &image);
  ASSERT_EQ(image.device_entries_size(), 2);
  const criu::KfdDeviceEntry& cpu_entry = image.device_entries(0);
  const criu::KfdDeviceEntry& gpu_entry = image.device_entries(1);
  EXPECT_EQ(cpu_entry.gpu_id(), 0u);
  EXPECT_EQ(cpu_entry.cpu_cores_count(), 16u);
  EXPECT_EQ(gpu_entry.gpu_id(), 0x2222u);
  EXPECT_EQ(gpu_entry.cpu_cores_count(), 0u);
  EXPECT_EQ(gpu_entry.simd_count(), 32u);
  EXPECT_EQ(image.num_of_gpus(), 1u);
  EXPECT_EQ(image.num_of_cpus(), 1u);

  Result<Topology> back = TopologyFromImage(image, "img");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->gpus().size(), 1u);
  EXPECT_EQ(back->gpus()[0]->gpu_id, 0x2222u);
  EXPECT_EQ(back->gpus()[0]->cpu_cores_count, 0u);
  EXPECT_EQ(back->gpus()[0]->simd_count, 32u);
}

//! Only valid PCIe and XGMI links are written: upstream's parser drops other
//! types, and topology_to_devinfo drops links to nodes not in the topology.
TEST(KfdDevinfoUpstream, OnlyValidPcieAndXgmiLinks) {
  Topology t;
  t.nodes.push_back(Cpu(0, 8));
  t.nodes.push_back(Gpu(1, 0x1111));
  t.nodes.push_back(Gpu(2, 0x2222));
  KfdNode& cpu = t.nodes[0];
  cpu.iolinks = {
      {kIoLinkTypePcie, 1, 0, 20, 0},
      {kIoLinkTypePcie, 2, 0, 20, 0},
      {kIoLinkTypeHyperTransport, 5, 0, 10, 0},  // to another socket's CPU node, not in this topology
      {kIoLinkTypePcie, 7, 0, 20, 0},            // to a GPU hidden by the device cgroup
  };
  KfdNode& g1 = t.nodes[1];
  g1.iolinks = {
      {kIoLinkTypePcie, 0, 1, 20, 0},
      {kIoLinkTypeXgmi, 2, 1, 15, 0},
      {kIoLinkTypeHyperTransport, 0, 1, 20, 0},  // a type upstream does not keep, to a valid node
      {0, 2, 1, 20, 0},                          // undefined type
      {kIoLinkTypeXgmi, 9, 1, 15, 0},            // to a hidden GPU
  };
  g1.io_links_count = 5;
  t.nodes[2].iolinks = {{kIoLinkTypePcie, 0, 2, 20, 0}, {kIoLinkTypeXgmi, 1, 2, 15, 0}};

  criu::CriuKfd image;
  TopologyToImage(t, {}, &image);
  ASSERT_EQ(image.device_entries_size(), 3);
  using L = std::vector<std::pair<uint32_t, uint32_t>>;
  EXPECT_EQ(Links(image.device_entries(0)), (L{{kIoLinkTypePcie, 1}, {kIoLinkTypePcie, 2}}));
  EXPECT_EQ(Links(image.device_entries(1)), (L{{kIoLinkTypePcie, 0}, {kIoLinkTypeXgmi, 2}}));
  EXPECT_EQ(Links(image.device_entries(2)), (L{{kIoLinkTypePcie, 0}, {kIoLinkTypeXgmi, 1}}));
  // The property is written as the kernel gave it, as upstream does.
  EXPECT_EQ(image.device_entries(1).io_links_count(), 5u);
}

}  // namespace
}  // namespace vramflow
