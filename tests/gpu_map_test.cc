// SPDX-License-Identifier: MIT
// GPU remapping at restore (plugin/gpu_map.h): properties, switchable checks,
// XGMI hives, links, NUMA groups, and the messages that explain a refusal.
#include "plugin/gpu_map.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace vramflow {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kHiveA = 0xaaaa000011112222ull;
constexpr uint64_t kHiveB = 0xbbbb000033334444ull;

struct GpuSpec {
  uint32_t gpu_id;
  uint32_t numa = 0;     // CPU node it hangs off
  uint64_t hive_id = 0;  // 0: no hive; otherwise XGMI to every GPU of the hive
};

KfdNode Gpu(uint32_t node_id, const GpuSpec& spec) {
  KfdNode n;
  n.node_id = node_id;
  n.gpu_id = spec.gpu_id;
  n.hive_id = spec.hive_id;
  n.simd_count = 416;
  n.mem_banks_count = 1;
  n.caches_count = 270;
  n.max_waves_per_simd = 8;
  n.lds_size_in_kb = 64;
  n.num_gws = 64;
  n.wave_front_size = 64;
  n.array_count = 8;
  n.simd_arrays_per_engine = 1;
  n.cu_per_simd_array = 13;
  n.simd_per_cu = 4;
  n.max_slots_scratch_cu = 32;
  n.vendor_id = 4098;
  n.device_id = 29704;
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

// CPU nodes 0..numa_nodes-1, then one node per GPU in `gpus` order; each GPU
// has a PCIe link to its CPU node (and back) and XGMI links to its hive.
Topology MakeBox(uint32_t numa_nodes, const std::vector<GpuSpec>& gpus) {
  Topology t;
  for (uint32_t c = 0; c < numa_nodes; ++c) {
    KfdNode cpu;
    cpu.node_id = c;
    cpu.cpu_cores_count = 32;
    t.nodes.push_back(cpu);
  }
  for (size_t i = 0; i < gpus.size(); ++i) t.nodes.push_back(Gpu(numa_nodes + static_cast<uint32_t>(i), gpus[i]));
  for (size_t i = 0; i < gpus.size(); ++i) {
    KfdNode& g = t.nodes[numa_nodes + i];
    const uint32_t flags = kIoLinkFlagEnabled | kIoLinkFlagBidirectional;
    g.iolinks.push_back(IoLink{kIoLinkTypePcie, gpus[i].numa, g.node_id, 20, flags});
    t.nodes[gpus[i].numa].iolinks.push_back(IoLink{kIoLinkTypePcie, g.node_id, gpus[i].numa, 20, flags});
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (j == i || gpus[i].hive_id == 0 || gpus[j].hive_id != gpus[i].hive_id) continue;
      g.iolinks.push_back(IoLink{kIoLinkTypeXgmi, numa_nodes + static_cast<uint32_t>(j), g.node_id, 15, flags});
    }
  }
  for (KfdNode& n : t.nodes) n.io_links_count = static_cast<uint32_t>(n.iolinks.size());
  return t;
}

KfdNode& Node(Topology& t, uint32_t gpu_id) {
  for (KfdNode& n : t.nodes) {
    if (n.gpu_id == gpu_id) return n;
  }
  throw std::logic_error("no GPU " + std::to_string(gpu_id) + " in the fixture");
}

Topology TwoGpuPcie(uint32_t base = 0x100) { return MakeBox(1, {{base}, {base + 1}}); }

Topology FourGpuHive(uint32_t base = 0x200, uint64_t hive = kHiveA) {
  return MakeBox(1, {{base, 0, hive}, {base + 1, 0, hive}, {base + 2, 0, hive}, {base + 3, 0, hive}});
}

// Two sockets with a hive of four GPUs each.
Topology EightGpuTwoHives(uint32_t base = 0x1000, uint64_t hive0 = kHiveA, uint64_t hive1 = kHiveB) {
  std::vector<GpuSpec> specs;
  for (uint32_t i = 0; i < 8; ++i) specs.push_back({base + i, i < 4 ? 0u : 1u, i < 4 ? hive0 : hive1});
  return MakeBox(2, specs);
}

std::string Message(const Result<GpuMap>& r) { return r.ok() ? "(mapped)" : r.status().message(); }

// Every source GPU maps to a distinct destination GPU that exists.
void ExpectBijection(const Topology& src, const Topology& dst, const GpuMap& map) {
  ASSERT_EQ(map.size(), src.gpus().size());
  std::set<uint32_t> targets;
  for (const auto& [from, to] : map) {
    EXPECT_NE(src.FindGpu(from), nullptr) << from;
    EXPECT_NE(dst.FindGpu(to), nullptr) << to;
    targets.insert(to);
  }
  EXPECT_EQ(targets.size(), map.size());
}

TEST(GpuMapTest, IdenticalTopologiesMapOntoThemselves) {
  for (const Topology& t : {TwoGpuPcie(), FourGpuHive(), EightGpuTwoHives()}) {
    Result<GpuMap> map = MapGpus(t, t, MapChecks{});
    ASSERT_TRUE(map.ok()) << Message(map);
    // Every GPU is interchangeable with its twins, so any bijection would do;
    // the search tries destination GPUs in node order, giving the identity.
    for (const auto& [from, to] : *map) EXPECT_EQ(from, to);
  }
}

TEST(GpuMapTest, NoGpusMapToNothing) {
  Topology cpus_only = MakeBox(2, {});
  Result<GpuMap> map = MapGpus(cpus_only, cpus_only, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  EXPECT_TRUE(map->empty());
}

TEST(GpuMapTest, DifferentGpuIdsMapByProperties) {
  // Two kinds of GPU; the destination lists them the other way round, with
  // new gpu_ids.
  Topology src = TwoGpuPcie(0x100);
  Node(src, 0x101).simd_count = 304;
  Node(src, 0x101).device_id = 29856;
  Topology dst = TwoGpuPcie(0x900);
  Node(dst, 0x900).simd_count = 304;
  Node(dst, 0x900).device_id = 29856;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  EXPECT_EQ(map->at(0x100), 0x901u);
  EXPECT_EQ(map->at(0x101), 0x900u);
}

TEST(GpuMapTest, XgmiHivesMapAsGroups) {
  Topology src = EightGpuTwoHives(0x1000, kHiveA, kHiveB);
  // Here the hives have other ids, and the GPUs are listed interleaved.
  std::vector<GpuSpec> specs;
  for (uint32_t i = 0; i < 8; ++i) specs.push_back({0x2000 + i, i % 2, i % 2 ? 0x77ull : 0x88ull});
  Topology dst = MakeBox(2, specs);
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  ExpectBijection(src, dst, *map);
  std::map<uint64_t, std::set<uint64_t>> hive_images;  // source hive -> destination hives
  for (const auto& [from, to] : *map) hive_images[src.FindGpu(from)->hive_id].insert(dst.FindGpu(to)->hive_id);
  ASSERT_EQ(hive_images.size(), 2u);
  EXPECT_EQ(hive_images[kHiveA].size(), 1u);
  EXPECT_EQ(hive_images[kHiveB].size(), 1u);
  EXPECT_NE(*hive_images[kHiveA].begin(), *hive_images[kHiveB].begin());
}

TEST(GpuMapTest, BacktracksWhenTheFirstHiveChoiceIsWrong) {
  // Source hive A (old firmware) comes first and would fit either hive here;
  // taking the first (new firmware) leaves hive B nowhere to go.
  Topology src = MakeBox(1, {{0x10, 0, kHiveA}, {0x11, 0, kHiveA}, {0x12, 0, kHiveB}, {0x13, 0, kHiveB}});
  for (uint32_t id : {0x10u, 0x11u}) Node(src, id).fw_version = 10;
  for (uint32_t id : {0x12u, 0x13u}) Node(src, id).fw_version = 50;
  Topology dst = MakeBox(1, {{0x20, 0, 0x5}, {0x21, 0, 0x5}, {0x22, 0, 0x6}, {0x23, 0, 0x6}});
  for (uint32_t id : {0x20u, 0x21u}) Node(dst, id).fw_version = 60;
  for (uint32_t id : {0x22u, 0x23u}) Node(dst, id).fw_version = 30;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  ExpectBijection(src, dst, *map);
  for (uint32_t id : {0x10u, 0x11u}) EXPECT_EQ(dst.FindGpu(map->at(id))->hive_id, 0x6u);
  for (uint32_t id : {0x12u, 0x13u}) EXPECT_EQ(dst.FindGpu(map->at(id))->hive_id, 0x5u);
}

TEST(GpuMapTest, BacktracksWhenGreedyMatchingFails) {
  // Each source GPU fits two destination GPUs; taking the first fit for 0x1
  // (0xa) leaves 0x3 without any.
  Topology src = MakeBox(1, {{0x1}, {0x2}, {0x3}});
  Topology dst = MakeBox(1, {{0xa}, {0xb}, {0xc}});
  auto set = [](KfdNode& n, uint32_t fw, uint32_t gws) {
    n.fw_version = fw;
    n.num_gws = gws;
  };
  set(Node(src, 0x1), 1, 5);  // fits 0xa, 0xc
  set(Node(src, 0x2), 5, 1);  // fits 0xa, 0xb
  set(Node(src, 0x3), 5, 1);  // fits 0xa, 0xb
  set(Node(dst, 0xa), 10, 10);
  set(Node(dst, 0xb), 10, 1);
  set(Node(dst, 0xc), 1, 10);
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  ExpectBijection(src, dst, *map);
  EXPECT_EQ(map->at(0x1), 0xcu);
}

TEST(GpuMapTest, BacktracksToKeepNumaGroups) {
  // 0x1 and 0x2 share socket 0; here only sockets 1 has two GPUs.
  Topology src = MakeBox(2, {{0x1, 0}, {0x2, 0}, {0x3, 1}});
  Topology dst = MakeBox(2, {{0xa, 0}, {0xb, 1}, {0xc, 1}});
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  ExpectBijection(src, dst, *map);
  EXPECT_EQ(map->at(0x3), 0xau);
}

TEST(GpuMapTest, GpuCountsMustMatch) {
  Result<GpuMap> fewer = MapGpus(FourGpuHive(), TwoGpuPcie(), MapChecks{});
  ASSERT_FALSE(fewer.ok());
  EXPECT_EQ(fewer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(Message(fewer).find("the checkpoint has 4 GPUs {0x200, 0x201, 0x202, 0x203} but this machine has 2 "
                                "{0x100, 0x101}"),
            std::string::npos)
      << Message(fewer);
  Result<GpuMap> more = MapGpus(TwoGpuPcie(), FourGpuHive(), MapChecks{});
  ASSERT_FALSE(more.ok());
  EXPECT_NE(Message(more).find("has 2 GPUs"), std::string::npos) << Message(more);
  EXPECT_NE(Message(more).find("this machine has 4"), std::string::npos) << Message(more);
}

TEST(GpuMapTest, MoreHivesThanHereIsAnError) {
  Topology src = MakeBox(1, {{0x1, 0, kHiveA}, {0x2, 0, kHiveA}, {0x3, 0, kHiveB}, {0x4, 0, kHiveB}});
  Result<GpuMap> map = MapGpus(src, FourGpuHive(), MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("form 2 XGMI hives"), std::string::npos) << Message(map);
  EXPECT_NE(Message(map).find("this machine's form 1"), std::string::npos) << Message(map);
}

TEST(GpuMapTest, HiveMustLandInOneHive) {
  // Four GPUs in one hive; here two hives of two. io_links_count is made to
  // agree so that only the hive rule stands in the way.
  Topology src = FourGpuHive();
  Topology dst = MakeBox(1, {{0x1, 0, 0x5}, {0x2, 0, 0x5}, {0x3, 0, 0x6}, {0x4, 0, 0x6}});
  for (const KfdNode* g : dst.gpus()) Node(dst, g->gpu_id).io_links_count = 4;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("no assignment keeps each XGMI hive within one hive here"), std::string::npos)
      << Message(map);
  EXPECT_NE(Message(map).find("hive 0x5 {0x1, 0x2}"), std::string::npos) << Message(map);
}

TEST(GpuMapTest, XgmiLinkCannotBecomePcie) {
  // Two GPUs joined by XGMI without a hive id, against two joined by PCIe.
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  const uint32_t flags = kIoLinkFlagEnabled | kIoLinkFlagBidirectional;
  auto join = [&](Topology& t, uint32_t base, uint32_t type) {
    Node(t, base).iolinks.push_back(IoLink{type, 2, 1, 15, flags});
    Node(t, base + 1).iolinks.push_back(IoLink{type, 1, 2, 15, flags});
    for (uint32_t id : {base, base + 1}) Node(t, id).io_links_count = 2;
  };
  join(src, 0x100, kIoLinkTypeXgmi);
  join(dst, 0x900, kIoLinkTypePcie);
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("no assignment keeps the links between GPUs"), std::string::npos) << Message(map);
  // PCIe where there was PCIe, or XGMI standing in for PCIe, is fine.
  EXPECT_TRUE(MapGpus(dst, dst, MapChecks{}).ok());
  EXPECT_TRUE(MapGpus(dst, src, MapChecks{}).ok());
}

TEST(GpuMapTest, BidirectionalLinkCannotBecomeOneWay) {
  Topology src = TwoGpuPcie(0x100);
  Node(src, 0x100).iolinks.push_back(IoLink{kIoLinkTypePcie, 2, 1, 15, 0});
  Node(src, 0x101).iolinks.push_back(IoLink{kIoLinkTypePcie, 1, 2, 15, 0});
  Topology dst = TwoGpuPcie(0x900);
  Node(dst, 0x900).iolinks.push_back(IoLink{kIoLinkTypePcie, 2, 1, 15, 0});
  Node(dst, 0x900).iolinks.push_back(IoLink{kIoLinkTypePcie, 0, 1, 99, 0});  // pads io_links_count
  for (Topology* t : {&src, &dst}) {
    for (const KfdNode* g : t->gpus()) Node(*t, g->gpu_id).io_links_count = 3;
  }
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("links between GPUs"), std::string::npos) << Message(map);
}

TEST(GpuMapTest, PropertyMismatchNamesPropertyAndBothValues) {
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  Node(dst, 0x900).simd_count = 228;
  Node(dst, 0x901).simd_count = 228;
  Node(dst, 0x901).vram_public = false;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  const std::string m = Message(map);
  EXPECT_NE(m.find("no GPU here can take checkpointed GPU 0x100 (node 1)"), std::string::npos) << m;
  EXPECT_NE(m.find("[GPU 0x900 (node 1): simd_count 416 in the checkpoint, 228 here]"), std::string::npos) << m;
  EXPECT_NE(m.find("[GPU 0x901 (node 2): simd_count 416 in the checkpoint, 228 here; vram_public yes in the "
                   "checkpoint, no here]"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("and 1 more checkpointed GPUs fit no GPU here"), std::string::npos) << m;
}

TEST(GpuMapTest, GpusCompetingForTooFewCandidatesAreNamed) {
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  Node(dst, 0x901).device_id = 1;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  const std::string m = Message(map);
  EXPECT_NE(m.find("2 checkpointed GPUs {0x100, 0x101} fit only 1 GPUs here {0x900}"), std::string::npos) << m;
  EXPECT_NE(m.find("device_id 29704 in the checkpoint, 1 here"), std::string::npos) << m;
}

// One switchable "at least as much here" check: lowering the value on one
// side of a pair must fail with the check on and pass with it off.
struct OrderedCheckCase {
  const char* name;
  const char* variable;
  bool MapChecks::*check;
  std::function<void(KfdNode&)> lower;  // makes the destination smaller
  std::function<void(KfdNode&)> raise;  // makes the destination bigger
};

class GpuMapCheckTest : public ::testing::TestWithParam<OrderedCheckCase> {};

TEST_P(GpuMapCheckTest, LowerHereFailsUnlessSwitchedOff) {
  const OrderedCheckCase& c = GetParam();
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  for (const KfdNode* g : dst.gpus()) c.lower(Node(dst, g->gpu_id));
  Result<GpuMap> on = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(on.ok()) << c.name;
  EXPECT_NE(Message(on).find(std::string("[GPU 0x900 (node 1): ") + c.name + " "), std::string::npos) << Message(on);
  EXPECT_NE(Message(on).find(std::string(c.variable) + "=0 skips this check"), std::string::npos) << Message(on);
  MapChecks off;
  off.*c.check = false;
  Result<GpuMap> relaxed = MapGpus(src, dst, off);
  ASSERT_TRUE(relaxed.ok()) << Message(relaxed);
  EXPECT_EQ(relaxed->at(0x100), 0x900u);

  Topology bigger = TwoGpuPcie(0x900);
  for (const KfdNode* g : bigger.gpus()) c.raise(Node(bigger, g->gpu_id));
  EXPECT_TRUE(MapGpus(src, bigger, MapChecks{}).ok()) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    GpuMap, GpuMapCheckTest,
    ::testing::Values(
        OrderedCheckCase{"fw_version", "KFD_FW_VER_CHECK", &MapChecks::fw_version,
                         [](KfdNode& n) { n.fw_version = 77; }, [](KfdNode& n) { n.fw_version = 79; }},
        OrderedCheckCase{"sdma_fw_version", "KFD_SDMA_FW_VER_CHECK", &MapChecks::sdma_fw_version,
                         [](KfdNode& n) { n.sdma_fw_version = 8; }, [](KfdNode& n) { n.sdma_fw_version = 10; }},
        OrderedCheckCase{"caches_count", "KFD_CACHES_COUNT_CHECK", &MapChecks::caches_count,
                         [](KfdNode& n) { n.caches_count = 200; }, [](KfdNode& n) { n.caches_count = 300; }},
        OrderedCheckCase{"num_gws", "KFD_NUM_GWS_CHECK", &MapChecks::num_gws, [](KfdNode& n) { n.num_gws = 0; },
                         [](KfdNode& n) { n.num_gws = 65; }},
        OrderedCheckCase{"vram_size", "KFD_VRAM_SIZE_CHECK", &MapChecks::vram_size,
                         [](KfdNode& n) { n.vram_size = 32 * kGiB; }, [](KfdNode& n) { n.vram_size = 128 * kGiB; }},
        OrderedCheckCase{"capability", "KFD_CAPABILITY_CHECK", &MapChecks::capability,
                         [](KfdNode& n) { n.capability ^= 0x100; }, [](KfdNode&) {}}),
    [](const ::testing::TestParamInfo<OrderedCheckCase>& info) { return std::string(info.param.name); });

TEST(GpuMapTest, VramSizeMessageShowsBytesAndUnits) {
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  Node(dst, 0x900).vram_size = 32 * kGiB;
  Node(dst, 0x901).vram_size = 32 * kGiB;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("vram_size 68719476736 (64.00 GiB) in the checkpoint, only 34359738368 (32.00 GiB) here"),
            std::string::npos)
      << Message(map);
}

TEST(GpuMapTest, CapabilityMustBeEqualEvenWhenHigher) {
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  for (const KfdNode* g : dst.gpus()) Node(dst, g->gpu_id).capability |= 0x1;
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("capability 0x28a3e280 in the checkpoint, 0x28a3e281 here"), std::string::npos)
      << Message(map);
}

TEST(GpuMapTest, UnswitchablePropertiesStayChecked) {
  Topology src = TwoGpuPcie(0x100);
  Topology dst = TwoGpuPcie(0x900);
  for (const KfdNode* g : dst.gpus()) Node(dst, g->gpu_id).num_cp_queues = 16;
  MapChecks none{false, false, false, false, false, false, false};
  Result<GpuMap> map = MapGpus(src, dst, none);
  ASSERT_FALSE(map.ok());
  EXPECT_NE(Message(map).find("num_cp_queues 24 in the checkpoint, 16 here"), std::string::npos) << Message(map);
}

TEST(GpuMapTest, NumaGroupsStayTogetherUnlessSwitchedOff) {
  Topology src = MakeBox(2, {{0x1, 0}, {0x2, 0}});  // both on socket 0
  Topology dst = MakeBox(2, {{0xa, 0}, {0xb, 1}});  // one per socket
  Result<GpuMap> on = MapGpus(src, dst, MapChecks{});
  ASSERT_FALSE(on.ok());
  const std::string m = Message(on);
  EXPECT_NE(m.find("no assignment keeps GPUs that share a NUMA node on one NUMA node"), std::string::npos) << m;
  EXPECT_NE(m.find("checkpoint: NUMA node 0 {0x1, 0x2}; here: NUMA node 0 {0xa}; NUMA node 1 {0xb}"), std::string::npos)
      << m;
  EXPECT_NE(m.find("KFD_NUMA_CHECK=0 skips this check"), std::string::npos) << m;
  MapChecks off;
  off.numa = false;
  Result<GpuMap> relaxed = MapGpus(src, dst, off);
  ASSERT_TRUE(relaxed.ok()) << Message(relaxed);
  ExpectBijection(src, dst, *relaxed);
}

TEST(GpuMapTest, NumaNumbersMayChange) {
  Topology src = MakeBox(2, {{0x1, 0}, {0x2, 0}, {0x3, 1}, {0x4, 1}});
  Topology dst = MakeBox(2, {{0xa, 1}, {0xb, 0}, {0xc, 1}, {0xd, 0}});
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  EXPECT_EQ(dst.NumaNode(*dst.FindGpu(map->at(0x1))), dst.NumaNode(*dst.FindGpu(map->at(0x2))));
  EXPECT_EQ(dst.NumaNode(*dst.FindGpu(map->at(0x3))), dst.NumaNode(*dst.FindGpu(map->at(0x4))));
  EXPECT_NE(dst.NumaNode(*dst.FindGpu(map->at(0x1))), dst.NumaNode(*dst.FindGpu(map->at(0x3))));
}

TEST(GpuMapTest, SixteenTwinGpusMapQuicklyEitherWay) {
  // Many identical GPUs: the search must not try every permutation, whether
  // a mapping exists (8 + 8 onto 8 + 8) or not (8 + 8 onto 10 + 6).
  std::vector<GpuSpec> even, uneven;
  for (uint32_t i = 0; i < 16; ++i) {
    even.push_back({0x100 + i, i < 8 ? 0u : 1u});
    uneven.push_back({0x200 + i, i < 10 ? 0u : 1u});
  }
  Topology src = MakeBox(2, even);
  auto start = std::chrono::steady_clock::now();
  Result<GpuMap> ok = MapGpus(src, MakeBox(2, even), MapChecks{});
  Result<GpuMap> bad = MapGpus(src, MakeBox(2, uneven), MapChecks{});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_TRUE(ok.ok()) << Message(ok);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Message(bad).find("NUMA"), std::string::npos) << Message(bad);
}

TEST(GpuMapTest, TwoHivesOnTwoSocketsRenumbered) {
  // The same machine after a reboot: gpu_ids and hive ids all new, sockets
  // swapped.
  Topology src = EightGpuTwoHives(0x1000, kHiveA, kHiveB);
  std::vector<GpuSpec> specs;
  for (uint32_t i = 0; i < 8; ++i) specs.push_back({0x3000 + i, i < 4 ? 1u : 0u, i < 4 ? 0x99ull : 0x98ull});
  Topology dst = MakeBox(2, specs);
  Result<GpuMap> map = MapGpus(src, dst, MapChecks{});
  ASSERT_TRUE(map.ok()) << Message(map);
  ExpectBijection(src, dst, *map);
  // Each hive, and each socket, lands as a whole on one hive and one socket.
  for (uint32_t first : {0x1000u, 0x1004u}) {
    const KfdNode* lead = dst.FindGpu(map->at(first));
    for (uint32_t i = 1; i < 4; ++i) {
      const KfdNode* g = dst.FindGpu(map->at(first + i));
      EXPECT_EQ(g->hive_id, lead->hive_id);
      EXPECT_EQ(dst.NumaNode(*g), dst.NumaNode(*lead));
    }
  }
  EXPECT_NE(dst.FindGpu(map->at(0x1000))->hive_id, dst.FindGpu(map->at(0x1004))->hive_id);
}

TEST(GpuMapTest, GpuMismatchesIsEmptyForTwins) {
  KfdNode a = Gpu(1, {0x1});
  KfdNode b = Gpu(7, {0x2, 1, kHiveB});  // ids, node, NUMA and hive are not properties
  EXPECT_TRUE(GpuMismatches(a, b, MapChecks{}).empty());
  b.lds_size_in_kb = 128;
  b.wave_front_size = 32;
  std::vector<std::string> m = GpuMismatches(a, b, MapChecks{});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], "lds_size_in_kb 64 in the checkpoint, 128 here");
  EXPECT_EQ(m[1], "wave_front_size 64 in the checkpoint, 32 here");
}

}  // namespace
}  // namespace vramflow
