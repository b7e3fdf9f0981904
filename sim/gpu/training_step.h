// SPDX-License-Identifier: MIT
// One simulated training step over a SimProcess's BOs, between two
// checkpoints of `vramflow demo --base`: what changes, and how, as a
// training job's memory changes from one checkpoint to the next.
//
// - fp32 master weights and Adam's moments: about half of the words change
//   in their low 10 mantissa bits (small updates: sign, exponent and upper
//   mantissa stay), so that an XOR with the previous checkpoint is mostly
//   zero bits;
// - bf16 weights stay as they are (a frozen or replicated copy: references
//   to the base);
// - activations and scratch are rewritten, and the first eighth of the
//   KV-cache pool fills.
// Deterministic for a seed; runs in parallel over 4 MiB pieces.
#pragma once

#include <cstdint>

#include "sim/gpu/sim_process.h"

namespace vramflow {

struct TrainingStepReport {
  uint64_t perturbed_bytes = 0;  // bytes of BOs whose words changed in low bits
  uint64_t rewritten_bytes = 0;  // bytes written anew
};

TrainingStepReport ApplyTrainingStep(SimProcess& process, uint64_t seed);

}  // namespace vramflow
