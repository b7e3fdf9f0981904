// SPDX-License-Identifier: MIT
// Model-like data for tests, benchmarks and the demo.
//
// Synthetic stand-ins for what a training job keeps in VRAM: fp32 weights
// drawn from N(0, 0.02), their bf16, fp16 and fp8 (e4m3, per-tensor scaled)
// copies, Adam moments (first
// moment: small signed values ~N(0, 1e-3); second moment: small positive
// squares of such values), zero-filled regions and random bytes.
//
// Generation is seeded and random-access: the bytes at any offset depend only
// on (kind, seed, offset), so any range can be produced alone, in parallel,
// and produced again later to check a restore without keeping a copy.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vramflow {

enum class DataKind { kFp32Weights, kBf16Weights, kFp16Weights, kAdamM, kAdamV, kZeros, kRandom, kFp8Weights };

std::vector<DataKind> AllDataKinds();
std::string DataKindName(DataKind kind);  // "fp32", "bf16", "fp16", "fp8", "adam-m", "adam-v", "zeros", "random"
std::optional<DataKind> ParseDataKind(std::string_view name);

// Fills `out` with the bytes of the (kind, seed) sequence starting at byte
// `offset`. Any offset is allowed (ranges need not be word aligned).
void GenerateModelData(DataKind kind, uint64_t seed, uint64_t offset, std::span<uint8_t> out);

// The same data after `step` steps of an AdamW optimizer (docs/DATA.md,
// "Training steps"): step 0 is GenerateModelData. Element i of fp32, adam-m
// and adam-v are one parameter's weight and moments, updated together each
// step from a gradient drawn for (seed, i, step); bf16, fp16 and fp8 are
// the updated weights rounded. zeros and random do not change. Still random
// access; a step costs `step` updates per element.
void GenerateTrainingState(DataKind kind, uint64_t seed, uint32_t step, uint64_t offset, std::span<uint8_t> out);

// Rounding conversions used by the generator, exposed for tests.
uint16_t FloatToBf16(float f);
uint16_t FloatToFp16(float f);
// OCP float8 e4m3fn (no infinities; 0x7f/0xff are NaN), rounded to nearest
// even and saturated at +-448, as scaled fp8 casts do.
uint8_t FloatToFp8E4M3(float f);
// fp8 weights are the fp32 weights times this: 5 standard deviations reach
// e4m3's largest value, as a per-tensor scale puts a tensor's range there.
inline constexpr float kFp8WeightScale = 448.0f / (5 * 0.02f);

}  // namespace vramflow
