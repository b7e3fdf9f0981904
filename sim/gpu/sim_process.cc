// SPDX-License-Identifier: MIT
#include "sim/gpu/sim_process.h"

#include <oneapi/tbb/parallel_for.h>

#include <atomic>
#include <cstring>

namespace vramflow {

std::vector<SimBoSpec> DemoLayout(uint32_t gpus, uint64_t bytes_per_gpu, uint64_t seed) {
  auto part = [&](double fraction) { return static_cast<uint64_t>(bytes_per_gpu * fraction) / 4096 * 4096; };
  std::vector<SimBoSpec> specs;
  for (uint32_t g = 0; g < gpus; ++g) {
    std::string prefix = "gpu" + std::to_string(g) + "/";
    uint64_t own = seed * 1000 + g;
    specs.push_back({prefix + "weights.bf16", g, part(0.25), DataKind::kBf16Weights, seed});  // replicated
    specs.push_back({prefix + "master.fp32", g, part(0.20), DataKind::kFp32Weights, own});
    specs.push_back({prefix + "adam.m", g, part(0.15), DataKind::kAdamM, own});
    specs.push_back({prefix + "adam.v", g, part(0.15), DataKind::kAdamV, own});
    specs.push_back({prefix + "kv-cache", g, part(0.20), DataKind::kZeros, 0});
    specs.push_back({prefix + "activations.fp16", g, part(0.04) + 12345, DataKind::kFp16Weights, own});  // unaligned
    specs.push_back({prefix + "scratch", g, part(0.01), DataKind::kRandom, own});
  }
  return specs;
}

SimProcess::SimProcess(uint32_t gpus, const SimDeviceOptions& options) {
  for (uint32_t g = 0; g < gpus; ++g)
    devices_.push_back(std::make_unique<SimDevice>("gpu" + std::to_string(g), options));
}

Status SimProcess::Allocate(const std::vector<SimBoSpec>& specs) {
  for (const SimBoSpec& spec : specs) {
    if (spec.gpu >= devices_.size())
      return Status::InvalidArgument("BO '" + spec.name + "' on a GPU that does not exist");
    if (!by_name_.emplace(spec.name, bos_.size()).second)
      return Status::InvalidArgument("two BOs named '" + spec.name + "'");
    Bo bo;
    VF_ASSIGN_OR_RETURN(bo.fd, CreateSimBo(spec.name, spec.size));
    VF_ASSIGN_OR_RETURN(bo.map, BoMapping::Map(bo.fd.get(), spec.size));
    VF_ASSIGN_OR_RETURN(bo.handle, devices_[spec.gpu]->ImportBo(bo.fd.get(), spec.size));
    bos_.push_back(std::move(bo));
    specs_.push_back(spec);
  }
  return Status::Ok();
}

void SimProcess::Fill() {
  constexpr uint64_t kPiece = 4 << 20;
  std::vector<std::pair<size_t, uint64_t>> pieces;
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].kind != DataKind::kZeros)
      for (uint64_t off = 0; off < specs_[i].size; off += kPiece) pieces.emplace_back(i, off);
  oneapi::tbb::parallel_for(size_t{0}, pieces.size(), [&](size_t p) {
    auto [i, off] = pieces[p];
    size_t n = static_cast<size_t>(std::min(kPiece, specs_[i].size - off));
    GenerateModelData(specs_[i].kind, specs_[i].seed, off, std::span<uint8_t>(bos_[i].map.data() + off, n));
  });
}

Result<std::vector<DumpSource>> SimProcess::DumpSources() {
  std::vector<DumpSource> out;
  for (size_t i = 0; i < specs_.size(); ++i) {
    DumpSource s;
    s.device = devices_[specs_[i].gpu].get();
    s.bo = bos_[i].handle;
    s.size = specs_[i].size;
    s.metadata.name = specs_[i].name;
    s.metadata.attributes.emplace_back("gpu", std::to_string(specs_[i].gpu));
    out.push_back(std::move(s));
  }
  return out;
}

RestoreResolver SimProcess::Resolver() {
  return [this](const ObjectState& object) -> Result<RestoreTarget> {
    auto it = by_name_.find(object.metadata.name);
    if (it == by_name_.end())
      return Status::InvalidArgument("the process has no BO named '" + object.metadata.name + "'");
    const SimBoSpec& spec = specs_[it->second];
    if (object.size != spec.size)
      return Status::InvalidArgument("BO '" + spec.name + "' is " + std::to_string(spec.size) +
                                     " bytes, the stream has " + std::to_string(object.size));
    return RestoreTarget{devices_[spec.gpu].get(), bos_[it->second].handle};
  };
}

Status SimProcess::Compare(SimProcess& other) {
  if (other.specs_.size() != specs_.size()) return Status::Corruption("the processes have different BO counts");
  std::atomic<int64_t> first_bad{-1};
  oneapi::tbb::parallel_for(size_t{0}, specs_.size(), [&](size_t i) {
    auto it = other.by_name_.find(specs_[i].name);
    if (it == other.by_name_.end() || other.specs_[it->second].size != specs_[i].size ||
        (specs_[i].size && std::memcmp(bos_[i].map.data(), other.bos_[it->second].map.data(), specs_[i].size) != 0)) {
      int64_t expected = -1;
      first_bad.compare_exchange_strong(expected, static_cast<int64_t>(i));
    }
  });
  if (first_bad >= 0) return Status::Corruption("BO '" + specs_[first_bad].name + "' differs after restore");
  return Status::Ok();
}

Status SimProcess::VerifyAgainstSpecs() {
  constexpr uint64_t kPiece = 4 << 20;
  std::vector<std::pair<size_t, uint64_t>> pieces;
  for (size_t i = 0; i < specs_.size(); ++i)
    for (uint64_t off = 0; off < specs_[i].size; off += kPiece) pieces.emplace_back(i, off);
  std::atomic<int64_t> first_bad{-1};
  oneapi::tbb::parallel_for(size_t{0}, pieces.size(), [&](size_t p) {
    auto [i, off] = pieces[p];
    size_t n = static_cast<size_t>(std::min(kPiece, specs_[i].size - off));
    std::vector<uint8_t> expected(n);
    GenerateModelData(specs_[i].kind, specs_[i].seed, off, expected);
    if (std::memcmp(expected.data(), bos_[i].map.data() + off, n) != 0) {
      int64_t none = -1;
      first_bad.compare_exchange_strong(none, static_cast<int64_t>(i));
    }
  });
  if (first_bad >= 0) return Status::Corruption("BO '" + specs_[first_bad].name + "' does not hold the expected bytes");
  return Status::Ok();
}

std::vector<Device*> SimProcess::devices() {
  std::vector<Device*> out;
  for (auto& d : devices_) out.push_back(d.get());
  return out;
}

uint64_t SimProcess::total_bytes() const {
  uint64_t total = 0;
  for (const SimBoSpec& s : specs_) total += s.size;
  return total;
}

std::span<uint8_t> SimProcess::bytes(size_t index) {
  return std::span<uint8_t>(bos_[index].map.data(), specs_[index].size);
}

}  // namespace vramflow
