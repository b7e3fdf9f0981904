// SPDX-License-Identifier: MIT
// SimProcess: a simulated GPU process — simulated devices plus BOs with
// model-like contents — for the demo, benchmarks and tests.
//
// The standard layout (DemoLayout) gives each GPU: bf16 weights replicated
// on every GPU (data parallelism, so dedup has work), an fp32 master shard,
// Adam first and second moments, a zero-filled KV-cache pool, a little
// random scratch, and one BO of an unaligned size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "datagen/model_data.h"
#include "sim/gpu/sim_device.h"
#include "streamer/pipeline.h"

namespace vramflow {

struct SimBoSpec {
  std::string name;
  uint32_t gpu = 0;
  uint64_t size = 0;
  DataKind kind = DataKind::kZeros;
  uint64_t seed = 0;
};

std::vector<SimBoSpec> DemoLayout(uint32_t gpus, uint64_t bytes_per_gpu, uint64_t seed = 1);

class SimProcess {
 public:
  SimProcess(uint32_t gpus, const SimDeviceOptions& options);

  // Creates the BOs of `specs` (zero-filled) and imports each into its
  // device, as KFD hands a process's BOs to the checkpointer before any
  // contents move.
  Status Allocate(const std::vector<SimBoSpec>& specs);
  // Fills every BO from its spec, in parallel; zero BOs are left untouched.
  void Fill();
  // Every BO as a dump source.
  Result<std::vector<DumpSource>> DumpSources();
  // Resolves stream objects to this process's BOs by name.
  RestoreResolver Resolver();
  // Byte-for-byte comparison with another process of the same layout.
  Status Compare(SimProcess& other);
  // Checks every BO against the contents its spec generates, a piece at a
  // time (no second copy of the VRAM needed).
  Status VerifyAgainstSpecs();

  std::vector<Device*> devices();
  const std::vector<SimBoSpec>& specs() const { return specs_; }
  uint64_t total_bytes() const;
  // Raw bytes of BO `index` (its mapping).
  std::span<uint8_t> bytes(size_t index);

 private:
  struct Bo {
    UniqueFd fd;
    BoMapping map;
    uint32_t handle = 0;  // in its device
  };
  std::vector<std::unique_ptr<SimDevice>> devices_;
  std::vector<SimBoSpec> specs_;
  std::vector<Bo> bos_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace vramflow
