// SPDX-License-Identifier: MIT
#include "codecs/bit_pack.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "common/cpu_features.h"
#include "common/endian.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace vramflow {
namespace {

size_t PackedBytes(size_t n, unsigned width) { return (n * width + 7) / 8; }

// The varying bits of every byte value, gathered to the low end (lowest first).
std::array<uint8_t, 256> GatherTable(uint8_t varying) {
  std::array<uint8_t, 256> table{};
  for (unsigned v = 0; v < 256; ++v) {
    unsigned out = 0, k = 0;
    for (unsigned b = 0; b < 8; ++b)
      if (varying >> b & 1) out |= (v >> b & 1) << k++;
    table[v] = static_cast<uint8_t>(out);
  }
  return table;
}

// Inverse of GatherTable for the first 2^width values: the byte with those
// varying bits and the constant bits.
std::array<uint8_t, 256> ScatterTable(uint8_t varying, uint8_t constant_bits) {
  std::array<uint8_t, 256> table{};
  const unsigned width = std::popcount(varying);
  for (unsigned v = 0; v < (1u << width); ++v) {
    unsigned out = constant_bits, k = 0;
    for (unsigned b = 0; b < 8; ++b)
      if (varying >> b & 1) out |= (v >> k++ & 1) << b;
    table[v] = static_cast<uint8_t>(out);
  }
  return table;
}

// The varying bits of a byte as runs of adjacent bits: the run's bits sit at
// `mask` (in every byte of a 64-bit word) in the input byte, and `shift` bits
// lower in the packed value. At most four runs fit in a byte.
struct Runs {
  unsigned count = 0;
  unsigned shift[4] = {0, 0, 0, 0};
  uint64_t mask[4] = {0, 0, 0, 0};
};

Runs VaryingRuns(uint8_t varying) {
  Runs runs;
  unsigned packed = 0;  // position of the next varying bit in the packed value
  for (unsigned b = 0; b < 8;) {
    if (!(varying >> b & 1)) {
      ++b;
      continue;
    }
    unsigned end = b;
    while (end < 8 && (varying >> end & 1)) ++end;
    runs.shift[runs.count] = b - packed;
    runs.mask[runs.count] = ((uint64_t{1} << end) - (uint64_t{1} << b)) * 0x0101010101010101ull;
    ++runs.count;
    packed += end - b;
    b = end;
  }
  return runs;
}

// Eight fields of kWidth bits (lowest first) to one per byte, and back:
// three rounds of shifts and masks that halve or double the distance
// between fields, all eight at once in a 64-bit word.
template <unsigned kWidth>
uint64_t SpreadFields(uint64_t x) {
  constexpr uint64_t f4 = (uint64_t{1} << (4 * kWidth)) - 1;
  constexpr uint64_t f2 = ((uint64_t{1} << (2 * kWidth)) - 1) * 0x0000000100000001ull;
  constexpr uint64_t f1 = ((uint64_t{1} << kWidth) - 1) * 0x0001000100010001ull;
  x = (x & f4) | ((x << (32 - 4 * kWidth)) & (f4 << 32));
  x = (x & f2) | ((x << (16 - 2 * kWidth)) & (f2 << 16));
  return (x & f1) | ((x << (8 - kWidth)) & (f1 << 8));
}

template <unsigned kWidth>
uint64_t CompactFields(uint64_t x) {
  constexpr uint64_t f4 = (uint64_t{1} << (4 * kWidth)) - 1;
  constexpr uint64_t f2 = ((uint64_t{1} << (2 * kWidth)) - 1) * 0x0000000100000001ull;
  constexpr uint64_t f1 = ((uint64_t{1} << kWidth) - 1) * 0x0001000100010001ull;
  x = (x & f1) | ((x >> (8 - kWidth)) & (f1 << kWidth));
  x = (x & f2) | ((x >> (16 - 2 * kWidth)) & (f2 << (2 * kWidth)));
  return (x & f4) | ((x >> (32 - 4 * kWidth)) & (f4 << (4 * kWidth)));
}

// The whole groups of eight bytes; returns the bytes packed. Templates on
// the width and the number of runs, so that the shifts are constants and
// the loops over runs unrolled.
template <unsigned kWidth, unsigned kRuns>
size_t PackGroups(const uint8_t* in, size_t groups, const Runs& runs, uint8_t* out) {
  for (size_t g = 0; g < groups; ++g, in += 8, out += kWidth) {
    const uint64_t x = LoadLE64(in);
    uint64_t gathered = 0;
    for (unsigned r = 0; r < kRuns; ++r) gathered |= (x & runs.mask[r]) >> runs.shift[r];
    StoreLE64(out, CompactFields<kWidth>(gathered));
  }
  return groups * kWidth;
}

template <unsigned kWidth, unsigned kRuns>
void UnpackGroups(const uint8_t* in, size_t groups, const Runs& runs, uint64_t constant, uint8_t* out) {
  for (size_t g = 0; g < groups; ++g, in += kWidth, out += 8) {
    const uint64_t spread = SpreadFields<kWidth>(LoadLE64(in));
    uint64_t x = constant;
    for (unsigned r = 0; r < kRuns; ++r) x |= (spread << runs.shift[r]) & runs.mask[r];
    StoreLE64(out, x);
  }
}

template <unsigned kWidth>
size_t PackWidth(const uint8_t* in, size_t groups, const Runs& runs, uint8_t* out) {
  switch (runs.count) {
    case 1:
      return PackGroups<kWidth, 1>(in, groups, runs, out);
    case 2:
      return PackGroups<kWidth, 2>(in, groups, runs, out);
    case 3:
      return PackGroups<kWidth, 3>(in, groups, runs, out);
    default:
      return PackGroups<kWidth, 4>(in, groups, runs, out);
  }
}

template <unsigned kWidth>
void UnpackWidth(const uint8_t* in, size_t groups, const Runs& runs, uint64_t constant, uint8_t* out) {
  switch (runs.count) {
    case 1:
      return UnpackGroups<kWidth, 1>(in, groups, runs, constant, out);
    case 2:
      return UnpackGroups<kWidth, 2>(in, groups, runs, constant, out);
    case 3:
      return UnpackGroups<kWidth, 3>(in, groups, runs, constant, out);
    default:
      return UnpackGroups<kWidth, 4>(in, groups, runs, constant, out);
  }
}

#if defined(__x86_64__)
// The varying bits of a group of eight bytes are, in order, what PEXT takes
// out of the group's 64-bit word with `varying` in every byte: the format's
// bit stream as it is. PDEP puts them back.
__attribute__((target("bmi2"))) size_t PackGroupsBmi2(const uint8_t* in, size_t groups, uint8_t varying, uint8_t* out) {
  const uint64_t mask = varying * 0x0101010101010101ull;
  const unsigned width = std::popcount(varying);
  for (size_t g = 0; g < groups; ++g, in += 8, out += width) StoreLE64(out, _pext_u64(LoadLE64(in), mask));
  return groups * width;
}

__attribute__((target("bmi2"))) void UnpackGroupsBmi2(const uint8_t* in, size_t groups, uint8_t varying,
                                                      uint64_t constant, uint8_t* out) {
  const uint64_t mask = varying * 0x0101010101010101ull;
  const unsigned width = std::popcount(varying);
  for (size_t g = 0; g < groups; ++g, in += width, out += 8) StoreLE64(out, _pdep_u64(LoadLE64(in), mask) | constant);
}
#endif

size_t Pack(unsigned width, const uint8_t* in, size_t groups, uint8_t varying, uint8_t* out, IsaKernel kernel) {
#if defined(__x86_64__)
  if (width > 0 && UsesPextPdep(kernel)) return PackGroupsBmi2(in, groups, varying, out);
#endif
  const Runs runs = VaryingRuns(varying);
  switch (width) {
    case 1:
      return PackWidth<1>(in, groups, runs, out);
    case 2:
      return PackWidth<2>(in, groups, runs, out);
    case 3:
      return PackWidth<3>(in, groups, runs, out);
    case 4:
      return PackWidth<4>(in, groups, runs, out);
    case 5:
      return PackWidth<5>(in, groups, runs, out);
    case 6:
      return PackWidth<6>(in, groups, runs, out);
    case 7:
      return PackWidth<7>(in, groups, runs, out);
    case 8:
      return PackWidth<8>(in, groups, runs, out);
    default:
      return 0;  // width 0: nothing to store
  }
}

void Unpack(unsigned width, const uint8_t* in, size_t groups, uint8_t varying, uint8_t constant_bits, uint8_t* out,
            IsaKernel kernel) {
  const uint64_t constant = constant_bits * 0x0101010101010101ull;
#if defined(__x86_64__)
  if (width > 0 && UsesPextPdep(kernel)) return UnpackGroupsBmi2(in, groups, varying, constant, out);
#endif
  const Runs runs = VaryingRuns(varying);
  switch (width) {
    case 1:
      return UnpackWidth<1>(in, groups, runs, constant, out);
    case 2:
      return UnpackWidth<2>(in, groups, runs, constant, out);
    case 3:
      return UnpackWidth<3>(in, groups, runs, constant, out);
    case 4:
      return UnpackWidth<4>(in, groups, runs, constant, out);
    case 5:
      return UnpackWidth<5>(in, groups, runs, constant, out);
    case 6:
      return UnpackWidth<6>(in, groups, runs, constant, out);
    case 7:
      return UnpackWidth<7>(in, groups, runs, constant, out);
    case 8:
      return UnpackWidth<8>(in, groups, runs, constant, out);
    default:
      return;
  }
}

}  // namespace

uint8_t ConstantBits(std::span<const uint8_t> data) {
  if (data.empty()) return 0xff;
  // AND and OR of 8-byte words, four of each side by side: a bit is
  // constant where they agree.
  uint64_t ands[4] = {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}}, ors[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 32 <= data.size(); i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, data.data() + i + 8 * k, 8);
      ands[k] &= w;
      ors[k] |= w;
    }
  uint64_t all_and = ands[0] & ands[1] & ands[2] & ands[3], any_or = ors[0] | ors[1] | ors[2] | ors[3];
  for (; i + 8 <= data.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, data.data() + i, 8);
    all_and &= w;
    any_or |= w;
  }
  uint8_t a = 0xff, o = 0;
  for (int k = 0; k < 8 && i >= 8; ++k) {
    a &= static_cast<uint8_t>(all_and >> (8 * k));
    o |= static_cast<uint8_t>(any_or >> (8 * k));
  }
  for (; i < data.size(); ++i) {
    a &= data[i];
    o |= data[i];
  }
  return static_cast<uint8_t>(~(a ^ o));
}

size_t BitPackBound(size_t size) { return kBitPackHeaderBytes + size + 8; }

Result<size_t> BitPackCompress(std::span<const uint8_t> src, std::span<uint8_t> dst,
                               std::optional<uint8_t> constant_mask, IsaKernel kernel) {
  if (dst.size() < BitPackBound(src.size())) return Status::Internal("bitpack output buffer too small");
  if (!KernelRunsHere(kernel)) return Status::InvalidArgument("this CPU has no BMI2");
  const uint8_t mask = constant_mask ? *constant_mask : ConstantBits(src);
  const uint8_t constant_bits = src.empty() ? 0 : static_cast<uint8_t>(src[0] & mask);
  const uint8_t varying = static_cast<uint8_t>(~mask);
  const unsigned width = std::popcount(varying);
  dst[0] = mask;
  dst[1] = constant_bits;
  uint8_t* out = dst.data() + kBitPackHeaderBytes;
  const std::array<uint8_t, 256> gather = GatherTable(varying);
  const uint8_t* in = src.data();
  const size_t n = src.size();
  // Eight bytes at a time: 8 * width bits, stored with one 8-byte store
  // (the bound's slack covers the bytes beyond the width).
  size_t i = n / 8 * 8;
  out += Pack(width, in, n / 8, varying, out, kernel);
  uint64_t acc = 0;
  unsigned bits = 0;
  for (; i < n; ++i) {
    acc |= uint64_t{gather[in[i]]} << bits;
    bits += width;
  }
  StoreLE64(out, acc);
  out += (bits + 7) / 8;
  return static_cast<size_t>(out - dst.data());
}

size_t BitPackTopBitsBound(size_t size) { return kBitPackHeaderBytes + PackedBytes(size, 1); }

size_t BitPackTopBits(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  const uint8_t* in = src.data();
  const size_t n = src.size();
  uint8_t* out = dst.data() + kBitPackHeaderBytes;
  unsigned any_set = 0, any_clear = 0;  // over the bits packed
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    const unsigned bits =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    any_set |= bits;
    any_clear |= ~bits & 0xffff;
    StoreLE16(out + i / 8, static_cast<uint16_t>(bits));
  }
#endif
  for (; i < n; i += 8) {
    const size_t count = std::min<size_t>(8, n - i);
    unsigned bits = 0;
    for (size_t k = 0; k < count; ++k) bits |= static_cast<unsigned>(in[i + k] >> 7) << k;
    any_set |= bits;
    any_clear |= ~bits & ((1u << count) - 1);
    out[i / 8] = static_cast<uint8_t>(bits);
  }
  if (!any_set || !any_clear) {  // one value: a constant plane of 0s or of 1s
    dst[0] = 0xff;
    dst[1] = any_set ? 1 : 0;
    return kBitPackHeaderBytes;
  }
  dst[0] = 0xfe;
  dst[1] = 0;
  return kBitPackHeaderBytes + PackedBytes(n, 1);
}

Status BitPackDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst, IsaKernel kernel) {
  if (!KernelRunsHere(kernel)) return Status::InvalidArgument("this CPU has no BMI2");
  if (src.size() < kBitPackHeaderBytes) return Status::Corruption("bitpack payload shorter than its 2-byte header");
  const uint8_t mask = src[0], constant_bits = src[1];
  if (constant_bits & ~mask)
    return Status::Corruption("bitpack constant bits " + std::to_string(constant_bits) + " lie outside mask " +
                              std::to_string(mask));
  const uint8_t varying = static_cast<uint8_t>(~mask);
  const unsigned width = std::popcount(varying);
  const size_t n = dst.size();
  const size_t packed = PackedBytes(n, width);
  if (src.size() != kBitPackHeaderBytes + packed)
    return Status::Corruption("bitpack payload of " + std::to_string(src.size()) + " bytes, expected " +
                              std::to_string(kBitPackHeaderBytes + packed) + " for " + std::to_string(n) +
                              " bytes of " + std::to_string(width) + " bits");
  const uint8_t* in = src.data() + kBitPackHeaderBytes;
  if ((n * width) % 8 && (in[packed - 1] >> ((n * width) % 8)) != 0)
    return Status::Corruption("bitpack payload has non-zero padding bits");
  const std::array<uint8_t, 256> scatter = ScatterTable(varying, constant_bits);
  const uint64_t value_mask = (uint64_t{1} << width) - 1;
  uint8_t* out = dst.data();
  // Eight bytes per 8-byte load while the load stays inside the payload.
  const size_t groups = width == 0 ? 0 : std::min(n / 8, packed >= 8 ? (packed - 8) / width + 1 : 0);
  Unpack(width, in, groups, varying, constant_bits, out, kernel);
  size_t i = groups * 8;
  if (width == 0) {  // every byte is the constant bits
    if (n) std::memset(out, constant_bits, n);
    return Status::Ok();
  }
  // The rest from a zero-padded copy of the remaining bytes: fewer than 8
  // once the loop above stops (see its condition).
  uint8_t rest[16] = {};
  const size_t rest_begin = (i / 8) * width;
  std::memcpy(rest, in + rest_begin, packed - rest_begin);
  size_t bit = 0;
  for (; i < n; ++i) {
    uint64_t w = LoadLE64(rest + bit / 8) >> (bit % 8);
    out[i] = scatter[w & value_mask];
    bit += width;
  }
  return Status::Ok();
}

}  // namespace vramflow
