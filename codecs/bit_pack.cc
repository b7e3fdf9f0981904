// SPDX-License-Identifier: MIT
#include "codecs/bit_pack.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "common/endian.h"

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

// The whole groups of eight bytes; returns the bytes packed. A template on
// the width so that the shifts are constants.
template <unsigned kWidth>
size_t PackGroups(const uint8_t* in, size_t groups, const std::array<uint8_t, 256>& gather, uint8_t* out) {
  for (size_t g = 0; g < groups; ++g, in += 8, out += kWidth) {
    uint64_t acc = 0;
    for (unsigned k = 0; k < 8; ++k) acc |= uint64_t{gather[in[k]]} << (k * kWidth);
    StoreLE64(out, acc);
  }
  return groups * kWidth;
}

template <unsigned kWidth>
void UnpackGroups(const uint8_t* in, size_t groups, const std::array<uint8_t, 256>& scatter, uint8_t* out) {
  constexpr uint64_t kValueMask = (uint64_t{1} << kWidth) - 1;
  for (size_t g = 0; g < groups; ++g, in += kWidth, out += 8) {
    const uint64_t w = LoadLE64(in);
    for (unsigned k = 0; k < 8; ++k) out[k] = scatter[(w >> (k * kWidth)) & kValueMask];
  }
}

size_t Pack(unsigned width, const uint8_t* in, size_t groups, const std::array<uint8_t, 256>& gather, uint8_t* out) {
  switch (width) {
    case 1: return PackGroups<1>(in, groups, gather, out);
    case 2: return PackGroups<2>(in, groups, gather, out);
    case 3: return PackGroups<3>(in, groups, gather, out);
    case 4: return PackGroups<4>(in, groups, gather, out);
    case 5: return PackGroups<5>(in, groups, gather, out);
    case 6: return PackGroups<6>(in, groups, gather, out);
    case 7: return PackGroups<7>(in, groups, gather, out);
    case 8: return PackGroups<8>(in, groups, gather, out);
    default: return 0;  // width 0: nothing to store
  }
}

void Unpack(unsigned width, const uint8_t* in, size_t groups, const std::array<uint8_t, 256>& scatter, uint8_t* out) {
  switch (width) {
    case 1: return UnpackGroups<1>(in, groups, scatter, out);
    case 2: return UnpackGroups<2>(in, groups, scatter, out);
    case 3: return UnpackGroups<3>(in, groups, scatter, out);
    case 4: return UnpackGroups<4>(in, groups, scatter, out);
    case 5: return UnpackGroups<5>(in, groups, scatter, out);
    case 6: return UnpackGroups<6>(in, groups, scatter, out);
    case 7: return UnpackGroups<7>(in, groups, scatter, out);
    case 8: return UnpackGroups<8>(in, groups, scatter, out);
    default: return;
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
                               std::optional<uint8_t> constant_mask) {
  if (dst.size() < BitPackBound(src.size())) return Status::Internal("bitpack output buffer too small");
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
  out += Pack(width, in, n / 8, gather, out);
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

Status BitPackDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
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
  Unpack(width, in, groups, scatter, out);
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
