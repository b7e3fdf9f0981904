// SPDX-License-Identifier: MIT
// The CRIU plugin's parts below the hooks: its settings, the topology a KFD
// image carries, where images go, and one GPU's BO contents through a
// stream or upstream's raw pages image.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "common/endian.h"
#include "plugin/image_store.h"
#include "plugin/kfd/kfd_devinfo.h"
#include "plugin/plugin_options.h"
#include "plugin/vram_base.h"
#include "plugin/vram_io.h"
#include "sim/gpu/sim_device.h"
#include "sim/kfd/sim_kfd.h"
#include "streamer/format/amdgpu_pages.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"
#include "transport/core/uri.h"
#include "transport/net/net_source.h"

namespace vramflow {
namespace {

using Env = std::map<std::string, std::string>;

Result<PluginOptions> FromEnv(const Env& env) {
  return PluginOptionsFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(PluginOptions, DefaultsAndEveryVariable) {
  Result<PluginOptions> d = FromEnv({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->pipeline.max_memory, 0u);  // fitted to the machine by each graph
  EXPECT_EQ(d->pipeline.threads, 0u);
  EXPECT_EQ(d->topology_root, kKfdTopologyRoot);
  EXPECT_TRUE(d->target.empty());
  EXPECT_EQ(d->parallel_restore, Tristate::kAuto);

  Result<PluginOptions> o = FromEnv({{"KFD_MAX_BUFFER_SIZE", "64M"},
                                     {"VRAMFLOW_CODEC", "zstd:3"},
                                     {"VRAMFLOW_THREADS", "3"},
                                     {"VRAMFLOW_TARGET", "tcp://host:7070"},
                                     {"VRAMFLOW_KFD_TOPOLOGY", "/tmp/topo"},
                                     {"VRAMFLOW_PARALLEL_RESTORE", "off"},
                                     {"KFD_NUMA_CHECK", "0"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->pipeline.max_memory, 64ull << 20);
  EXPECT_EQ(o->pipeline.encoder.codec, CodecChoice::kZstd);
  EXPECT_EQ(o->pipeline.encoder.zstd_level, 3);
  EXPECT_EQ(o->pipeline.threads, 3u);
  EXPECT_EQ(o->target, "tcp://host:7070");
  EXPECT_EQ(o->topology_root, "/tmp/topo");
  EXPECT_EQ(o->parallel_restore, Tristate::kOff);
  EXPECT_FALSE(o->checks.numa);
  EXPECT_TRUE(o->checks.vram_size);
  // Upstream's "no cap" fits the budget to the machine, as unset does.
  EXPECT_EQ(FromEnv({{"KFD_MAX_BUFFER_SIZE", "0"}})->pipeline.max_memory, 0u);
}

TEST(KfdDevinfo, TopologySurvivesTheImageWithUserGpuIds) {
  SimKfdOptions options;
  options.gpus = 3;
  options.xgmi_hive_id = 0xabc;
  SimKfd kfd(options);
  Result<Topology> machine = kfd.MachineTopology();
  ASSERT_TRUE(machine.ok());
  const uint32_t first = machine->gpus()[0]->gpu_id;
  criu::CriuKfd image;
  TopologyToImage(*machine, {{first, 0x7777}}, &image);
  EXPECT_EQ(image.num_of_gpus(), 3u);
  EXPECT_EQ(image.num_of_cpus(), machine->cpus().size());
  Result<Topology> back = TopologyFromImage(image, "img");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->nodes.size(), machine->nodes.size());
  for (size_t i = 0; i < back->nodes.size(); ++i) {
    KfdNode expected = machine->nodes[i];
    if (expected.gpu_id == first) expected.gpu_id = 0x7777;
    for (IoLink& l : expected.iolinks) l = IoLink{l.type, l.node_to_id, expected.node_id, 0, 0};  // what an image keeps
    EXPECT_EQ(back->nodes[i], expected) << "node " << i;
  }
  EXPECT_EQ(back->nodes[1].hive_id, 0xabcu);
}

TEST(KfdDevinfo, InconsistentImagesAreCorruption) {
  SimKfd kfd;
  criu::CriuKfd image;
  TopologyToImage(*kfd.MachineTopology(), {}, &image);
  criu::CriuKfd wrong_count = image;
  wrong_count.set_num_of_gpus(image.num_of_gpus() + 1);
  EXPECT_EQ(TopologyFromImage(wrong_count, "img").status().code(), Status::Code::kCorruption);
  criu::CriuKfd repeated = image;
  *repeated.add_device_entries() = image.device_entries(1);
  repeated.set_num_of_gpus(image.num_of_gpus() + 1);
  EXPECT_EQ(TopologyFromImage(repeated, "img").status().code(), Status::Code::kCorruption);
}

TEST(ImageStore, DirectoryStoreCommitsOrLeavesNothing) {
  testing::TempDir dir;
  auto store = DirectoryStore(dir.path());
  Result<std::unique_ptr<ByteSource>> missing = store->Open("nope.img");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, nullptr);
  {
    auto sink = store->Create("a.img");
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Write(std::vector<uint8_t>{1, 2, 3}).ok());
    // not committed: destroyed
  }
  EXPECT_EQ(*store->Open("a.img"), nullptr);
  auto sink = store->Create("a.img");
  ASSERT_TRUE((*sink)->Write(std::vector<uint8_t>{1, 2, 3}).ok());
  ASSERT_TRUE((*sink)->Commit().ok());
  EXPECT_EQ(testing::ReadFileBytes(dir.File("a.img")), (std::vector<uint8_t>{1, 2, 3}));
}

// A second dump into the same directory replaces the first one's images
// (issue 49, defect 1), in the images directory and under a {name} path.
TEST(ImageStore, ADumpReplacesItsEarlierImages) {
  testing::TempDir dir;
  auto store = DirectoryStore(dir.path());
  auto templated = TargetStore(dir.path() + "/t-{name}", TransportOptions());
  ASSERT_TRUE(templated.ok());
  for (ImageStore* s : {store.get(), templated->get()}) {
    for (uint8_t round : {1, 2}) {
      auto sink = s->Create("a.img");
      ASSERT_TRUE(sink.ok()) << sink.status().ToString();
      ASSERT_TRUE((*sink)->Write(std::vector<uint8_t>{round}).ok());
      ASSERT_TRUE((*sink)->Commit().ok());
    }
  }
  EXPECT_EQ(testing::ReadFileBytes(dir.File("a.img")), std::vector<uint8_t>{2});
  EXPECT_EQ(testing::ReadFileBytes(dir.File("t-a.img")), std::vector<uint8_t>{2});
}

// An incremental dump whose VRAMFLOW_BASE is where it writes the same
// stream would replace its own base: refused, naming VRAMFLOW_BASE.
TEST(ImageStore, BaseThatIsTheDumpsOwnStreamIsRefused) {
  testing::TempDir dir;
  ASSERT_TRUE(std::filesystem::create_directories(dir.File("other")));
  const std::string name = "amdgpu-vram-19-1000.img";
  testing::WriteFileBytes(dir.File(name), std::vector<uint8_t>{1});
  auto store = DirectoryStore(dir.path());
  PluginOptions options;
  EXPECT_TRUE(RefuseBaseAsTarget(options, store->Location(name), name).ok());  // no base
  options.base = dir.path();
  Status same = RefuseBaseAsTarget(options, store->Location(name), name);
  EXPECT_EQ(same.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(same.message().find("VRAMFLOW_BASE=" + dir.path()), std::string::npos) << same.ToString();
  options.base = dir.File("other");
  EXPECT_TRUE(RefuseBaseAsTarget(options, store->Location(name), name).ok());
  EXPECT_TRUE(RefuseBaseAsTarget(options, "", name).ok());  // a receiver, a pipe: no location
}

TEST(ImageStore, TargetTemplatesAndSingleStreamUris) {
  testing::TempDir dir;
  TransportOptions transport;
  auto templated = TargetStore(dir.path() + "/x-{name}", transport);
  ASSERT_TRUE(templated.ok());
  auto sink = (*templated)->Create("s.img");
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Commit().ok());
  EXPECT_TRUE(std::filesystem::exists(dir.File("x-s.img")));
  EXPECT_EQ(*(*templated)->Open("other.img"), nullptr);

  auto directory = TargetStore(dir.path(), transport);
  ASSERT_TRUE(directory.ok());
  EXPECT_NE(*(*directory)->Open("x-s.img"), nullptr);

  // A network address carries every GPU's stream of a dump (one session
  // each: the second Create tries to connect, as the first did), but is
  // listened on for one stream on restore; the error says what to do.
  transport.accept_timeout = std::chrono::milliseconds(1);
  auto network = TargetStore("unix:" + dir.File("nobody.sock"), transport);
  ASSERT_TRUE(network.ok());
  (void)(*network)->Create("first.img");
  Result<std::unique_ptr<ByteSink>> second = (*network)->Create("second.img");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("connecting to unix:"), std::string::npos) << second.status().ToString();
  (void)(*network)->Open("first.img");  // nobody sends; the name is taken all the same
  Result<std::unique_ptr<ByteSource>> other = (*network)->Open("second.img");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("{name}"), std::string::npos) << other.status().ToString();
  EXPECT_NE(other.status().message().find("recv --output-dir"), std::string::npos) << other.status().ToString();

  // Any other URI holds one stream, dump or restore.
  auto stdout_target = TargetStore("-", transport);
  ASSERT_TRUE(stdout_target.ok());
  ASSERT_TRUE((*stdout_target)->Create("first.img").ok());
  Result<std::unique_ptr<ByteSink>> refused = (*stdout_target)->Create("second.img");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("{name}"), std::string::npos) << refused.status().ToString();
}

// Each stream a network target carries is named after its image, so one
// receiver can tell a dump's GPUs apart (recv --output-dir stores them so).
TEST(ImageStore, NetworkTargetNamesEachStreamAfterItsImage) {
  testing::TempDir dir;
  const std::string uri = "unix:" + dir.File("recv.sock");
  NetOptions receiving;
  receiving.sessions = 0;
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  ASSERT_TRUE(endpoint.ok());
  auto receiver = NetReceiver::Listen(*endpoint, receiving);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  const std::vector<std::string> names = {"amdgpu-vram-5-4096.img", "amdgpu-vram-5-8192.img"};
  std::vector<std::string> got;
  std::vector<std::vector<uint8_t>> bytes;
  std::thread consumer([&] {
    for (size_t i = 0; i < names.size(); ++i) {
      Result<NetStream> stream = (*receiver)->AcceptStream(std::chrono::milliseconds(10000));
      if (!stream.ok()) return;
      got.push_back(stream->name);
      bytes.emplace_back();
      std::vector<uint8_t> buf(4096);
      for (Result<size_t> n = stream->source->Read(buf); n.ok() && *n > 0; n = stream->source->Read(buf))
        bytes.back().insert(bytes.back().end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
      (void)stream->source->Finish(Status::Ok());
    }
  });
  TransportOptions transport;
  auto store = TargetStore(uri, transport);
  EXPECT_TRUE(store.ok());
  for (size_t i = 0; store.ok() && i < names.size(); ++i) {
    auto sink = (*store)->Create(names[i]);
    Status s = sink.ok() ? (*sink)->Write(std::vector<uint8_t>(1000 + i, static_cast<uint8_t>(i))) : sink.status();
    if (s.ok()) s = (*sink)->Commit();
    if (!s.ok()) {
      ADD_FAILURE() << names[i] << ": " << s.ToString();
      break;
    }
  }
  (*receiver)->Shutdown();  // the consumer stops waiting if a stream never came
  consumer.join();
  EXPECT_EQ(got, names);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[1], std::vector<uint8_t>(1001, 1));
}

// One GPU with a few BOs (memfds, as KFD's dma-bufs), filled with model-like data.
struct Gpu {
  SimDevice device{"gpu", SimDeviceOptions{}};
  std::vector<UniqueFd> fds;
  std::vector<BoMapping> maps;
  std::vector<VramBo> bos;

  explicit Gpu(const std::vector<uint64_t>& sizes, bool fill) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      fds.push_back(CreateSimBo("bo" + std::to_string(i), sizes[i]).value());
      maps.push_back(BoMapping::Map(fds.back().get(), sizes[i]).value());
      if (fill) GenerateModelData(DataKind::kBf16Weights, i + 1, 0, {maps.back().data(), sizes[i]});
      bos.push_back(VramBo{static_cast<uint32_t>(2 * i + 1), sizes[i], 0x1000 * i, fds.back().get()});
    }
  }
  std::vector<uint8_t> Bytes(size_t i) const { return {maps[i].data(), maps[i].data() + maps[i].size()}; }
};

PipelineOptions SmallPipeline() {
  PipelineOptions o;
  o.chunk_size = 256 << 10;
  o.max_memory = 16 << 20;
  o.threads = 2;
  return o;
}

TEST(VramIo, StreamRoundTripAndMismatches) {
  const std::vector<uint64_t> sizes = {1 << 20, 12345, 3 << 19};
  Gpu src(sizes, true);
  MemorySink sink;
  PipelineStats stats;
  ASSERT_TRUE(DumpVram(src.device, 0x1000, src.bos, sink, SmallPipeline(), &stats).ok());
  EXPECT_TRUE(sink.committed());

  Gpu dst(sizes, false);
  MemorySource source(sink.bytes());
  Status s = RestoreVram(dst.device, dst.bos, source, SmallPipeline(), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(dst.Bytes(i), src.Bytes(i)) << i;

  // A BO the stream lacks, and one it has in another size.
  Gpu more({1 << 20, 12345, 3 << 19, 4096}, false);
  MemorySource again(sink.bytes());
  s = RestoreVram(more.device, more.bos, again, SmallPipeline(), &stats);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("without BO 7"), std::string::npos) << s.ToString();
  Gpu resized({1 << 20, 12346, 3 << 19}, false);
  MemorySource third(sink.bytes());
  s = RestoreVram(resized.device, resized.bos, third, SmallPipeline(), &stats);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bo-3"), std::string::npos) << s.ToString();
}

std::vector<uint8_t> PagesImage(const Gpu& gpu, int64_t size_delta = 0) {
  std::vector<uint8_t> file(kAmdgpuPagesHeaderSize);
  for (size_t i = 0; i < gpu.bos.size(); ++i) {
    std::vector<uint8_t> b = gpu.Bytes(i);
    file.insert(file.end(), b.begin(), b.end());
  }
  EncodeAmdgpuPagesHeader(file.size() - kAmdgpuPagesHeaderSize + size_delta, HostIsLittleEndian(), file.data());
  return file;
}

TEST(VramIo, UpstreamRawPagesRestoreAndErrors) {
  const std::vector<uint64_t> sizes = {1 << 20, 12345, 700000};
  Gpu src(sizes, true);
  const std::vector<uint8_t> image = PagesImage(src);
  {
    Gpu dst(sizes, false);
    MemorySource source(image, 100000);  // short reads too
    Status s = RestoreRawPages(dst.device, dst.bos, source, SmallPipeline());
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(dst.Bytes(i), src.Bytes(i)) << i;
  }
  {
    Gpu dst(sizes, false);
    const std::vector<uint8_t> wrong = PagesImage(src, 1);
    MemorySource source(wrong);
    EXPECT_EQ(RestoreRawPages(dst.device, dst.bos, source, SmallPipeline()).code(), Status::Code::kCorruption);
  }
  {
    Gpu dst(sizes, false);
    std::vector<uint8_t> cut(image.begin(), image.end() - 100);
    MemorySource source(cut);
    EXPECT_EQ(RestoreRawPages(dst.device, dst.bos, source, SmallPipeline()).code(), Status::Code::kTruncated);
  }
  {
    Gpu dst(sizes, false);
    std::vector<uint8_t> longer = image;
    longer.push_back(0);
    MemorySource source(longer);
    EXPECT_EQ(RestoreRawPages(dst.device, dst.bos, source, SmallPipeline()).code(), Status::Code::kCorruption);
  }
}

}  // namespace
}  // namespace vramflow
