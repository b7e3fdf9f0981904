// SPDX-License-Identifier: MIT
// KFD topology parsing (plugin/kfd/topology.h) from sysfs trees built in a temp dir.
#include "plugin/kfd/topology.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Writes files of a fake /sys/class/kfd/kfd/topology under a temp dir.
class FakeSysfs {
 public:
  const std::string& root() const { return dir_.path(); }

  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::path path = std::filesystem::path(root()) / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // Writes `node` the way the kernel lays it out, with a few keys vramflow
  // does not know (the parser must skip them). VRAM becomes one bank, as the
  // kernel reports it; a CPU node gets a system-memory bank.
  void WriteNode(const KfdNode& n) {
    const std::string dir = "nodes/" + std::to_string(n.node_id);
    Write(dir + "/gpu_id", std::to_string(n.gpu_id) + "\n");
    std::string p;
    auto add = [&p](const char* key, uint64_t v) { p += std::string(key) + " " + std::to_string(v) + "\n"; };
    add("cpu_cores_count", n.cpu_cores_count);
    add("simd_count", n.simd_count);
    add("mem_banks_count", n.mem_banks_count);
    add("caches_count", n.caches_count);
    add("io_links_count", n.io_links_count);
    add("p2p_links_count", 0);
    add("cpu_core_id_base", 0);
    add("simd_id_base", 2147487744);
    add("max_waves_per_simd", n.max_waves_per_simd);
    add("lds_size_in_kb", n.lds_size_in_kb);
    add("gds_size_in_kb", n.gds_size_in_kb);
    add("num_gws", n.num_gws);
    add("wave_front_size", n.wave_front_size);
    add("array_count", n.array_count);
    add("simd_arrays_per_engine", n.simd_arrays_per_engine);
    add("cu_per_simd_array", n.cu_per_simd_array);
    add("simd_per_cu", n.simd_per_cu);
    add("max_slots_scratch_cu", n.max_slots_scratch_cu);
    add("gfx_target_version", n.is_gpu() ? 90010 : 0);
    add("vendor_id", n.vendor_id);
    add("device_id", n.device_id);
    add("location_id", 768);
    add("domain", n.domain);
    add("drm_render_minor", n.drm_render_minor);
    add("hive_id", n.hive_id);
    add("num_sdma_engines", n.num_sdma_engines);
    add("num_sdma_xgmi_engines", n.num_sdma_xgmi_engines);
    add("num_sdma_queues_per_engine", n.num_sdma_queues_per_engine);
    add("num_cp_queues", n.num_cp_queues);
    add("max_engine_clk_fcompute", 1700);
    add("local_mem_size", 0);
    add("fw_version", n.fw_version);
    add("capability", n.capability);
    add("debug_prop", 1495);
    add("sdma_fw_version", n.sdma_fw_version);
    add("unique_id", 1234567890123456789ull);
    add("num_xcc", 1);
    add("max_engine_clk_ccompute", 2200);
    Write(dir + "/properties", p);
    uint32_t heap = !n.is_gpu() ? kHeapTypeSystem : n.vram_public ? kHeapTypeFbPublic : kHeapTypeFbPrivate;
    uint64_t size = n.is_gpu() ? n.vram_size : 256 * kGiB;
    Write(dir + "/mem_banks/0/properties", "heap_type " + std::to_string(heap) + "\nsize_in_bytes " +
                                               std::to_string(size) + "\nflags 0\nwidth 4096\nmem_clk_max 1600\n");
    for (size_t k = 0; k < n.iolinks.size(); ++k) {
      const IoLink& l = n.iolinks[k];
      Write(dir + "/io_links/" + std::to_string(k) + "/properties",
            "type " + std::to_string(l.type) + "\nversion_major 0\nversion_minor 0\nnode_from " +
                std::to_string(l.node_from) + "\nnode_to " + std::to_string(l.node_to_id) + "\nweight " +
                std::to_string(l.weight) +
                "\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\nmax_bandwidth "
                "64000\nrecommended_transfer_size 0\nflags " +
                std::to_string(l.flags) + "\n");
    }
  }

  void WriteTopology(const Topology& t) {
    for (const KfdNode& n : t.nodes) WriteNode(n);
  }

 private:
  testing::TempDir dir_;
};

KfdNode Cpu(uint32_t node_id) {
  KfdNode n;
  n.node_id = node_id;
  n.cpu_cores_count = 64;
  n.mem_banks_count = 1;
  n.caches_count = 0;
  return n;
}

KfdNode Gpu(uint32_t node_id, uint32_t gpu_id) {
  KfdNode n;
  n.node_id = node_id;
  n.gpu_id = gpu_id;
  n.simd_count = 416;
  n.mem_banks_count = 1;
  n.caches_count = 270;
  n.max_waves_per_simd = 8;
  n.lds_size_in_kb = 64;
  n.gds_size_in_kb = 0;
  n.num_gws = 64;
  n.wave_front_size = 64;
  n.array_count = 8;
  n.simd_arrays_per_engine = 1;
  n.cu_per_simd_array = 13;
  n.simd_per_cu = 4;
  n.max_slots_scratch_cu = 32;
  n.vendor_id = 4098;
  n.device_id = 29704;
  n.domain = 0;
  n.drm_render_minor = 128 + node_id;
  n.num_sdma_engines = 2;
  n.num_sdma_xgmi_engines = 6;
  n.num_sdma_queues_per_engine = 8;
  n.num_cp_queues = 24;
  n.fw_version = 78;
  n.capability = 0x28a3e280;
  n.sdma_fw_version = 9;
  n.vram_public = true;
  n.vram_size = 64 * kGiB;
  return n;
}

void Link(Topology& t, uint32_t from, uint32_t to, uint32_t type, uint32_t weight) {
  for (KfdNode& n : t.nodes) {
    if (n.node_id != from) continue;
    n.iolinks.push_back(IoLink{type, to, from, weight, kIoLinkFlagEnabled | kIoLinkFlagBidirectional});
    n.io_links_count = static_cast<uint32_t>(n.iolinks.size());
  }
}

// Two sockets (CPU nodes 0 and 1); GPUs 2..9, 2..5 on socket 0 in hive A,
// 6..9 on socket 1 in hive B.
Topology EightGpuTwoHives() {
  Topology t;
  t.nodes = {Cpu(0), Cpu(1)};
  for (uint32_t i = 0; i < 8; ++i) {
    KfdNode g = Gpu(2 + i, 0x1000 + i);
    g.hive_id = i < 4 ? 0xaaaa000011112222ull : 0xbbbb000033334444ull;
    t.nodes.push_back(g);
  }
  for (uint32_t i = 0; i < 8; ++i) {
    uint32_t numa = i < 4 ? 0 : 1;
    Link(t, 2 + i, numa, kIoLinkTypePcie, 20);
    Link(t, numa, 2 + i, kIoLinkTypePcie, 20);
    for (uint32_t j = 0; j < 8; ++j) {
      if (j != i && (i < 4) == (j < 4)) Link(t, 2 + i, 2 + j, kIoLinkTypeXgmi, 15);
    }
  }
  Link(t, 0, 1, kIoLinkTypeHyperTransport, 32);
  Link(t, 1, 0, kIoLinkTypeHyperTransport, 32);
  return t;
}

Topology TwoGpuPcie() {
  Topology t;
  t.nodes = {Cpu(0), Gpu(1, 0xbeef), Gpu(2, 0x4b1d)};
  for (uint32_t g : {1u, 2u}) {
    Link(t, 0, g, kIoLinkTypePcie, 20);
    Link(t, g, 0, kIoLinkTypePcie, 20);
  }
  return t;
}

TEST(TopologyTest, ParsesWhatTheKernelWrites) {
  for (const Topology& want : {TwoGpuPcie(), EightGpuTwoHives()}) {
    FakeSysfs sysfs;
    sysfs.WriteTopology(want);
    Result<Topology> got = ParseTopology(sysfs.root());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->nodes.size(), want.nodes.size());
    for (size_t i = 0; i < want.nodes.size(); ++i) {
      EXPECT_EQ(got->nodes[i], want.nodes[i]) << "node " << want.nodes[i].node_id;
    }
  }
}

TEST(TopologyTest, ReadsEveryValue) {
  FakeSysfs sysfs;
  Topology t = EightGpuTwoHives();
  sysfs.WriteTopology(t);
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const KfdNode* g = got->FindGpu(0x1005);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->node_id, 7u);
  EXPECT_EQ(g->hive_id, 0xbbbb000033334444ull);  // all 64 bits
  EXPECT_EQ(g->simd_count, 416u);
  EXPECT_EQ(g->cu_per_simd_array, 13u);
  EXPECT_EQ(g->capability, 0x28a3e280u);
  EXPECT_EQ(g->drm_render_minor, 135u);
  EXPECT_EQ(g->sdma_fw_version, 9u);
  EXPECT_EQ(g->vram_size, 64 * kGiB);
  EXPECT_TRUE(g->vram_public);
  ASSERT_EQ(g->iolinks.size(), 4u);  // the CPU, then three hive peers
  EXPECT_EQ(g->iolinks[0].type, kIoLinkTypePcie);
  EXPECT_EQ(g->iolinks[0].node_to_id, 1u);
  EXPECT_EQ(g->iolinks[1].type, kIoLinkTypeXgmi);
  EXPECT_EQ(g->iolinks[1].node_from, 7u);
  EXPECT_EQ(g->iolinks[1].flags, kIoLinkFlagEnabled | kIoLinkFlagBidirectional);
  const KfdNode* cpu = got->FindNode(0);
  ASSERT_NE(cpu, nullptr);
  EXPECT_FALSE(cpu->is_gpu());
  EXPECT_EQ(cpu->cpu_cores_count, 64u);
  EXPECT_EQ(cpu->vram_size, 0u);  // system memory is not VRAM
  EXPECT_FALSE(cpu->vram_public);
}

TEST(TopologyTest, HelpersFindGpusAndCpus) {
  Topology t = EightGpuTwoHives();
  ASSERT_EQ(t.gpus().size(), 8u);
  ASSERT_EQ(t.cpus().size(), 2u);
  EXPECT_EQ(t.gpus()[0]->gpu_id, 0x1000u);
  EXPECT_EQ(t.cpus()[1]->node_id, 1u);
  EXPECT_EQ(t.FindGpu(0x1007)->node_id, 9u);
  EXPECT_EQ(t.FindGpu(0x2000), nullptr);
  EXPECT_EQ(t.FindGpu(0), nullptr);  // 0 names no GPU, though CPU nodes carry it
  EXPECT_EQ(t.FindNode(42), nullptr);
  EXPECT_EQ(DescribeNode(*t.FindNode(3)), "GPU 0x1001 (node 3)");
  EXPECT_EQ(DescribeNode(*t.FindNode(1)), "CPU node 1");
}

TEST(TopologyTest, NodesSortNumerically) {
  Topology t;
  t.nodes.push_back(Cpu(0));
  for (uint32_t i = 1; i <= 11; ++i) t.nodes.push_back(Gpu(i, 0x100 + i));
  FakeSysfs sysfs;
  sysfs.WriteTopology(t);
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->nodes.size(), 12u);
  for (uint32_t i = 0; i < 12; ++i) EXPECT_EQ(got->nodes[i].node_id, i);
}

TEST(TopologyTest, VramIsPublicAndPrivateBanksTogether) {
  FakeSysfs sysfs;
  sysfs.WriteNode(Gpu(1, 0x77));
  sysfs.Write("nodes/1/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 17179869184\n");
  sysfs.Write("nodes/1/mem_banks/1/properties", "heap_type 2\nsize_in_bytes 51539607552\n");
  sysfs.Write("nodes/1/mem_banks/2/properties", "heap_type 0\nsize_in_bytes 999\n");   // system
  sysfs.Write("nodes/1/mem_banks/3/properties", "heap_type 3\nsize_in_bytes 4096\n");  // GDS
  sysfs.WriteNode(Gpu(2, 0x78));
  sysfs.Write("nodes/2/mem_banks/0/properties", "heap_type 2\nsize_in_bytes 8589934592\n");
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->FindGpu(0x77)->vram_size, 64 * kGiB);
  EXPECT_TRUE(got->FindGpu(0x77)->vram_public);
  EXPECT_EQ(got->FindGpu(0x78)->vram_size, 8 * kGiB);
  EXPECT_FALSE(got->FindGpu(0x78)->vram_public);  // small BAR: only a private bank
}

TEST(TopologyTest, NodesWithoutGpuIdAreHidden) {
  // A device cgroup makes gpu_id unreadable (EPERM); a fixture can only
  // leave it out, which the parser treats the same way.
  FakeSysfs sysfs;
  sysfs.WriteTopology(TwoGpuPcie());
  std::filesystem::remove(std::filesystem::path(sysfs.root()) / "nodes/1/gpu_id");
  sysfs.Write("nodes/1/properties", "simd_count garbage\n");  // never read
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->nodes.size(), 2u);
  EXPECT_EQ(got->gpus().size(), 1u);
  EXPECT_EQ(got->FindNode(1), nullptr);
  EXPECT_EQ(got->gpus()[0]->gpu_id, 0x4b1du);
}

TEST(TopologyTest, UnknownKeysAndBlankLinesAreIgnored) {
  FakeSysfs sysfs;
  sysfs.Write("nodes/0/gpu_id", "0\n");
  sysfs.Write("nodes/0/properties", "cpu_cores_count 8\n\nmarketing_name Some GPU\nfuture_key\n  simd_count 0 \n");
  sysfs.Write("nodes/0/stray", "");
  sysfs.Write("nodes/notanode/gpu_id", "7\n");
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->nodes.size(), 1u);
  EXPECT_EQ(got->nodes[0].cpu_cores_count, 8u);
  EXPECT_TRUE(got->nodes[0].iolinks.empty());
}

TEST(TopologyTest, NonNumericValueNamesFileAndLine) {
  FakeSysfs sysfs;
  sysfs.WriteTopology(TwoGpuPcie());
  sysfs.Write("nodes/2/properties",
              "cpu_cores_count 0\nlds_size_in_kb 64\nmem_banks_count 1\ncaches_count 2\n"
              "simd_count x\n");
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kCorruption);
  EXPECT_NE(got.status().message().find("nodes/2/properties line 5: 'simd_count x' is not a number"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find(sysfs.root()), std::string::npos) << got.status().message();
}

TEST(TopologyTest, ValueErrors) {
  struct Case {
    std::string file, text, want;
  };
  const std::vector<Case> cases = {
      {"nodes/1/properties", "simd_count -4\n", "nodes/1/properties line 1: 'simd_count -4' is not a number"},
      {"nodes/1/properties", "vendor_id 0x1002\n", "line 1: 'vendor_id 0x1002' is not a number"},
      {"nodes/1/properties", "\nfw_version\n", "nodes/1/properties line 2: 'fw_version' is not a number"},
      {"nodes/1/properties", "num_gws 4294967296\n", "line 1: 'num_gws 4294967296' does not fit in 32 bits"},
      {"nodes/1/properties", "hive_id 18446744073709551616\n",
       "'hive_id 18446744073709551616' does not fit in 64 bits"},
      {"nodes/1/properties", "simd_count 4\nsimd_count 4\n", "line 2: 'simd_count' repeats line 1"},
      {"nodes/1/gpu_id", "gpu\n", "nodes/1/gpu_id: 'gpu' is not a 32-bit number"},
      {"nodes/1/mem_banks/0/properties", "heap_type 1\nsize_in_bytes lots\n",
       "nodes/1/mem_banks/0/properties line 2: 'size_in_bytes lots' is not a number"},
      {"nodes/1/io_links/1/properties", "type 11\nnode_to two\n",
       "nodes/1/io_links/1/properties line 2: 'node_to two' is not a number"},
  };
  for (const Case& c : cases) {
    FakeSysfs sysfs;
    sysfs.WriteTopology(TwoGpuPcie());
    sysfs.Write(c.file, c.text);
    Result<Topology> got = ParseTopology(sysfs.root());
    ASSERT_FALSE(got.ok()) << c.file << ": " << c.text;
    EXPECT_NE(got.status().message().find(c.want), std::string::npos) << got.status().message();
  }
}

TEST(TopologyTest, MissingFilesAreErrors) {
  {
    FakeSysfs sysfs;
    sysfs.WriteTopology(TwoGpuPcie());
    std::filesystem::remove(std::filesystem::path(sysfs.root()) / "nodes/2/properties");
    Result<Topology> got = ParseTopology(sysfs.root());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Status::Code::kIoError);
    EXPECT_NE(got.status().message().find("nodes/2/properties: No such file"), std::string::npos)
        << got.status().message();
  }
  {
    FakeSysfs sysfs;
    sysfs.WriteTopology(TwoGpuPcie());
    std::filesystem::remove(std::filesystem::path(sysfs.root()) / "nodes/2/io_links/0/properties");
    Result<Topology> got = ParseTopology(sysfs.root());
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("nodes/2/io_links/0/properties"), std::string::npos)
        << got.status().message();
  }
  {
    testing::TempDir empty;
    Result<Topology> got = ParseTopology(empty.path());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Status::Code::kNotSupported);
    EXPECT_NE(got.status().message().find("no nodes/ directory"), std::string::npos) << got.status().message();
  }
}

TEST(TopologyTest, NumaNodeIsTheCpuTheGpuLinksTo) {
  FakeSysfs sysfs;
  sysfs.WriteTopology(EightGpuTwoHives());
  Result<Topology> got = ParseTopology(sysfs.root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const KfdNode* g : got->gpus()) {
    EXPECT_EQ(got->NumaNode(*g), g->gpu_id < 0x1004 ? 0u : 1u) << DescribeNode(*g);
  }
  EXPECT_EQ(got->NumaNode(*got->FindNode(1)), 1u);  // a CPU node is its own NUMA node
}

TEST(TopologyTest, NumaNodePrefersTheLightestCpuLink) {
  Topology t = EightGpuTwoHives();
  Link(t, 2, 1, kIoLinkTypePcie, 40);  // an indirect route to the other socket
  EXPECT_EQ(t.NumaNode(*t.FindNode(2)), 0u);
  t.nodes[2].iolinks[0].weight = 50;
  EXPECT_EQ(t.NumaNode(*t.FindNode(2)), 1u);
}

TEST(TopologyTest, NumaNodeIsUnknownWithoutACpuLink) {
  Topology t = EightGpuTwoHives();
  t.nodes.erase(t.nodes.begin(), t.nodes.begin() + 2);  // CPU nodes gone: links lead nowhere
  EXPECT_EQ(t.NumaNode(*t.FindGpu(0x1000)), std::nullopt);
  KfdNode lone = Gpu(5, 0x55);
  EXPECT_EQ(TwoGpuPcie().NumaNode(lone), std::nullopt);
}

}  // namespace
}  // namespace vramflow
