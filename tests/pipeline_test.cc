// Dump and restore graphs end to end through simulated GPUs.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "datagen/model_data.h"
#include "sim/sim_device.h"
#include "streamer/pipeline.h"
#include "streamer/stream_reader.h"
#include "tests/test_util.h"
#include "transport/memory_stream.h"

namespace vramflow {
namespace {

// A simulated process: BOs on several simulated GPUs.
struct SimBo {
  std::string name;
  size_t gpu;
  uint64_t size;
  UniqueFd fd;
  BoMapping map;
};

class SimProcess {
 public:
  explicit SimProcess(size_t gpus, SimDeviceOptions options = {}) {
    for (size_t i = 0; i < gpus; ++i)
      devices_.push_back(std::make_unique<SimDevice>("gpu" + std::to_string(i), options));
  }
  SimBo& AddBo(const std::string& name, size_t gpu, uint64_t size) {
    SimBo bo;
    bo.name = name;
    bo.gpu = gpu;
    bo.size = size;
    bo.fd = CreateSimBo(name, size).value();
    bo.map = BoMapping::Map(bo.fd.get(), size).value();
    bos_.push_back(std::move(bo));
    return bos_.back();
  }
  std::vector<DumpSource> Sources() {
    std::vector<DumpSource> out;
    for (SimBo& bo : bos_) {
      DumpSource s;
      s.device = devices_[bo.gpu].get();
      s.bo = s.device->ImportBo(bo.fd.get(), bo.size).value();
      s.size = bo.size;
      s.metadata.name = bo.name;
      out.push_back(s);
    }
    return out;
  }
  std::vector<Device*> Devices() {
    std::vector<Device*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }
  SimDevice& device(size_t i) { return *devices_[i]; }
  std::vector<SimBo>& bos() { return bos_; }

 private:
  std::vector<std::unique_ptr<SimDevice>> devices_;
  std::vector<SimBo> bos_;
};

void Fill(SimBo& bo, DataKind kind, uint64_t seed) {
  GenerateModelData(kind, seed, 0, std::span<uint8_t>(bo.map.data(), bo.size));
}

// Restores `stream` into a fresh process with the same BO layout as `from`.
Status RestoreInto(const std::vector<uint8_t>& stream, SimProcess& from, SimProcess& to, const PipelineOptions& options,
                   PipelineStats* stats) {
  std::map<std::string, std::pair<size_t, uint64_t>> layout;
  for (SimBo& bo : from.bos()) layout[bo.name] = {bo.gpu, bo.size};
  for (auto& [name, where] : layout) to.AddBo(name, where.first, where.second);
  std::map<std::string, SimBo*> by_name;
  for (SimBo& bo : to.bos()) by_name[bo.name] = &bo;
  MemorySource source(stream);
  return RunRestore(
      &source, to.Devices(),
      [&](const ObjectState& object) -> Result<RestoreTarget> {
        auto it = by_name.find(object.metadata.name);
        if (it == by_name.end()) return Status::InvalidArgument("no BO named " + object.metadata.name);
        Device* d = &to.device(it->second->gpu);
        VF_ASSIGN_OR_RETURN(uint32_t bo, d->ImportBo(it->second->fd.get(), it->second->size));
        return RestoreTarget{d, bo};
      },
      options, stats);
}

void ExpectSameContents(SimProcess& a, SimProcess& b) {
  std::map<std::string, SimBo*> by_name;
  for (SimBo& bo : b.bos()) by_name[bo.name] = &bo;
  for (SimBo& bo : a.bos()) {
    SimBo* other = by_name.at(bo.name);
    ASSERT_EQ(bo.size, other->size);
    EXPECT_EQ(0, std::memcmp(bo.map.data(), other->map.data(), bo.size)) << bo.name;
  }
}

PipelineOptions SmallOptions() {
  PipelineOptions o;
  o.chunk_size = 64 << 10;
  o.max_memory = 16 << 20;
  o.threads = 2;
  return o;
}

TEST(PipelineTest, RoundTripsManyLayoutsAcrossTwoGpus) {
  SimProcess p(2);
  Fill(p.AddBo("gpu0/weights-bf16", 0, 1 << 20), DataKind::kBf16Weights, 1);
  Fill(p.AddBo("gpu1/weights-bf16", 1, 1 << 20), DataKind::kBf16Weights, 1);  // replica: dedup
  Fill(p.AddBo("gpu0/master-fp32", 0, (1 << 20) + 12345), DataKind::kFp32Weights, 2);
  Fill(p.AddBo("gpu1/adam-m", 1, 300000), DataKind::kAdamM, 3);
  Fill(p.AddBo("gpu1/adam-v", 1, 300001), DataKind::kAdamV, 4);
  p.AddBo("gpu0/kv-cache", 0, 3 << 20);  // zeros
  Fill(p.AddBo("gpu0/tiny", 0, 1), DataKind::kRandom, 5);
  p.AddBo("gpu1/empty", 1, 0);
  Fill(p.AddBo("gpu1/random", 1, 200000), DataKind::kRandom, 6);

  MemorySink sink;
  PipelineStats dump;
  ASSERT_TRUE(RunDump(p.Sources(), &sink, SmallOptions(), &dump).ok());
  EXPECT_EQ(dump.dedup_bytes, 1u << 20);
  EXPECT_GE(dump.zero_bytes, 3u << 20);
  EXPECT_LE(dump.budget_peak, SmallOptions().max_memory);

  // The stream is valid for the serial reference reader too.
  std::vector<testing::TestObject> objects;
  ASSERT_TRUE(testing::UnpackFromMemory(sink.bytes(), &objects).ok());
  EXPECT_EQ(objects.size(), p.bos().size());

  SimProcess restored(2);
  PipelineStats stats;
  Status s = RestoreInto(sink.bytes(), p, restored, SmallOptions(), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(stats.budget_peak, SmallOptions().max_memory);
  ExpectSameContents(p, restored);
}

TEST(PipelineTest, OutputIsDeterministic) {
  SimProcess p(2);
  Fill(p.AddBo("a", 0, 700000), DataKind::kBf16Weights, 1);
  Fill(p.AddBo("b", 1, 700000), DataKind::kBf16Weights, 1);
  Fill(p.AddBo("c", 1, 500000), DataKind::kFp32Weights, 1);
  MemorySink one, two;
  PipelineStats stats;
  PipelineOptions options = SmallOptions();
  ASSERT_TRUE(RunDump(p.Sources(), &one, options, &stats).ok());
  options.threads = 1;
  ASSERT_TRUE(RunDump(p.Sources(), &two, options, &stats).ok());
  EXPECT_EQ(one.bytes(), two.bytes());
}

}  // namespace
}  // namespace vramflow
