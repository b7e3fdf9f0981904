// SPDX-License-Identifier: MIT
#include "codecs/huffman.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/endian.h"

namespace vramflow {
namespace {

constexpr size_t kStreams = 4;
constexpr size_t kLengthTableBytes = 128;
constexpr size_t kHeaderBytes = 1 + kLengthTableBytes + 4 * (kStreams - 1);
constexpr size_t kPaddingBytes = 8;
constexpr unsigned kTableBits = 12;  // lookup width: one code of up to 11 bits, or two short ones
constexpr uint32_t kTableSize = 1u << kTableBits;
constexpr uint32_t kKraftTotal = 1u << kHuffmanMaxCodeLength;

using Counts = std::array<uint64_t, 256>;
using Lengths = std::array<uint8_t, 256>;

Counts Histogram(std::span<const uint8_t> src) {
  // Four tables break the store-to-load dependency on repeated values.
  std::array<std::array<uint32_t, 256>, 4> h{};
  const uint8_t* p = src.data();
  size_t n = src.size(), i = 0;
  for (; i + 4 <= n; i += 4) {
    ++h[0][p[i]];
    ++h[1][p[i + 1]];
    ++h[2][p[i + 2]];
    ++h[3][p[i + 3]];
  }
  for (; i < n; ++i) ++h[0][p[i]];
  Counts counts{};
  for (int s = 0; s < 256; ++s) counts[s] = uint64_t{h[0][s]} + h[1][s] + h[2][s] + h[3][s];
  return counts;
}

// Huffman code lengths for `counts` (at least two non-zero), by repeatedly
// merging the two lightest nodes.
Lengths BuildLengths(const Counts& counts) {
  struct Node {
    uint64_t weight;
    int parent;
  };
  std::vector<Node> nodes;
  std::vector<int> symbol_node(256, -1);
  std::vector<std::pair<uint64_t, int>> heap;  // (weight, node) min-heap
  for (int s = 0; s < 256; ++s) {
    if (!counts[s]) continue;
    symbol_node[s] = static_cast<int>(nodes.size());
    heap.emplace_back(counts[s], static_cast<int>(nodes.size()));
    nodes.push_back({counts[s], -1});
  }
  auto greater = [](const auto& a, const auto& b) { return a > b; };
  std::make_heap(heap.begin(), heap.end(), greater);
  while (heap.size() > 1) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    auto a = heap.back();
    heap.pop_back();
    std::pop_heap(heap.begin(), heap.end(), greater);
    auto b = heap.back();
    heap.pop_back();
    int parent = static_cast<int>(nodes.size());
    nodes.push_back({a.first + b.first, -1});
    nodes[a.second].parent = parent;
    nodes[b.second].parent = parent;
    heap.emplace_back(a.first + b.first, parent);
    std::push_heap(heap.begin(), heap.end(), greater);
  }
  Lengths lengths{};
  for (int s = 0; s < 256; ++s) {
    if (symbol_node[s] < 0) continue;
    int depth = 0;
    for (int n = symbol_node[s]; nodes[n].parent >= 0; n = nodes[n].parent) ++depth;
    lengths[s] = static_cast<uint8_t>(std::min(depth, 255));
  }
  return lengths;
}

// Optimal lengths of at most kHuffmanMaxCodeLength bits, by package-merge:
// level by level, from the longest codes up, the two lightest items of the
// level below are packaged into one and merged with the symbols; a symbol's
// length is the number of the 2n - 2 lightest top-level items it is part
// of. Float exponent planes, whose rare exponents want 15 to 20 bits, lose
// about 0.5% to a crude limit (halving counts until the tree fits).
Lengths PackageMergeLengths(const Counts& counts) {
  struct Item {
    uint64_t weight;
    int16_t symbol;  // a leaf, or -1: a package of items 2*child and 2*child+1 of the level below
    int16_t child;
  };
  std::array<Item, 256> leaves;
  int n = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) leaves[n++] = {counts[s], static_cast<int16_t>(s), -1};
  std::sort(leaves.begin(), leaves.begin() + n, [](const Item& a, const Item& b) { return a.weight < b.weight; });
  // levels[0]: codes of the full length; each level holds at most 2n - 1 items.
  std::array<std::array<Item, 511>, kHuffmanMaxCodeLength> levels;
  std::array<int, kHuffmanMaxCodeLength> sizes{};
  std::copy(leaves.begin(), leaves.begin() + n, levels[0].begin());
  sizes[0] = n;
  for (unsigned level = 1; level < kHuffmanMaxCodeLength; ++level) {
    const auto& below = levels[level - 1];
    const int packages = sizes[level - 1] / 2;
    int i = 0, p = 0, out = 0;
    while (i < n || p < packages) {
      uint64_t package_weight = p < packages ? below[2 * p].weight + below[2 * p + 1].weight : 0;
      if (p >= packages || (i < n && leaves[i].weight <= package_weight)) {
        levels[level][out++] = leaves[i++];
      } else {
        levels[level][out++] = {package_weight, -1, static_cast<int16_t>(p)};
        ++p;
      }
    }
    sizes[level] = out;
  }
  Lengths lengths{};
  // Count leaf occurrences in the first `take` items of `level`, recursively.
  auto count = [&](auto&& self, unsigned level, int take) -> void {
    int packages = 0;
    for (int k = 0; k < take; ++k) {
      const Item& item = levels[level][k];
      if (item.symbol >= 0) ++lengths[item.symbol];
      else packages = item.child + 1;  // packages appear in order: the last one seen covers all
    }
    if (packages) self(self, level - 1, 2 * packages);
  };
  count(count, kHuffmanMaxCodeLength - 1, 2 * n - 2);
  return lengths;
}

// Lengths no longer than kHuffmanMaxCodeLength: the Huffman code when it is
// short enough, otherwise the best code that is.
Lengths LimitedLengths(const Counts& counts) {
  Lengths lengths = BuildLengths(counts);
  if (*std::max_element(lengths.begin(), lengths.end()) <= kHuffmanMaxCodeLength) return lengths;
  return PackageMergeLengths(counts);
}

// Canonical codes from lengths, bit-reversed for LSB-first output.
std::array<uint16_t, 256> ReversedCanonicalCodes(const Lengths& lengths) {
  std::array<uint16_t, 256> codes{};
  uint32_t code = 0;
  for (unsigned len = 1; len <= kHuffmanMaxCodeLength; ++len) {
    for (int s = 0; s < 256; ++s) {
      if (lengths[s] != len) continue;
      uint32_t reversed = 0;
      for (unsigned b = 0; b < len; ++b) reversed |= ((code >> b) & 1u) << (len - 1 - b);
      codes[s] = static_cast<uint16_t>(reversed);
      ++code;
    }
    code <<= 1;
  }
  return codes;
}

struct StreamSplit {
  size_t begin[kStreams];
  size_t count[kStreams];
};

StreamSplit Split(size_t n) {
  StreamSplit split;
  size_t quarter = (n + kStreams - 1) / kStreams;
  for (size_t k = 0; k < kStreams; ++k) {
    split.begin[k] = std::min(n, k * quarter);
    split.count[k] = std::min(n, (k + 1) * quarter) - split.begin[k];
  }
  return split;
}

// One stream's bit writer: codes are OR-ed into a 64-bit accumulator and
// whole bytes stored with one unaligned 8-byte store, so `out` must have 8
// writable bytes beyond what the stream needs.
struct BitWriter {
  uint8_t* out;
  size_t pos = 0;
  uint64_t acc = 0;
  unsigned bits = 0;

  void Put(const std::array<uint16_t, 256>& codes, const Lengths& lengths, uint8_t s) {
    acc |= uint64_t{codes[s]} << bits;
    bits += lengths[s];
  }
  void Flush() {
    StoreLE64(out + pos, acc);
    pos += bits >> 3;
    acc = (bits & ~7u) == 64 ? 0 : acc >> (bits & ~7u);
    bits &= 7;
  }
  size_t Finish() {
    if (bits) {
      StoreLE64(out + pos, acc);
      ++pos;
    }
    return pos;
  }
};

// Largest encoding of `count` symbols by one stream.
size_t StreamBound(size_t count) { return (count * kHuffmanMaxCodeLength + 7) / 8; }

// Encodes the four streams of `split` from `src`, stream k starting at
// out + start[k] (each region StreamBound + 8 bytes); returns their sizes.
// The streams are encoded side by side, four symbols each per round: four
// independent dependency chains instead of one.
std::array<size_t, kStreams> EncodeStreams(const uint8_t* src, const StreamSplit& split,
                                           const std::array<uint16_t, 256>& codes, const Lengths& lengths,
                                           uint8_t* out, const size_t* start) {
  BitWriter w[kStreams] = {{out + start[0]}, {out + start[1]}, {out + start[2]}, {out + start[3]}};
  const uint8_t* s[kStreams];
  for (size_t k = 0; k < kStreams; ++k) s[k] = src + split.begin[k];
  size_t common = std::min({split.count[0], split.count[1], split.count[2], split.count[3]}) & ~size_t{3};
  for (size_t i = 0; i < common; i += 4) {  // 4 x 11 + 7 bits < 64
    for (size_t k = 0; k < kStreams; ++k) {
      w[k].Put(codes, lengths, s[k][i]);
      w[k].Put(codes, lengths, s[k][i + 1]);
      w[k].Put(codes, lengths, s[k][i + 2]);
      w[k].Put(codes, lengths, s[k][i + 3]);
      w[k].Flush();
    }
  }
  std::array<size_t, kStreams> sizes;
  for (size_t k = 0; k < kStreams; ++k) {
    size_t i = common;
    for (; i + 4 <= split.count[k]; i += 4) {
      w[k].Put(codes, lengths, s[k][i]);
      w[k].Put(codes, lengths, s[k][i + 1]);
      w[k].Put(codes, lengths, s[k][i + 2]);
      w[k].Put(codes, lengths, s[k][i + 3]);
      w[k].Flush();
    }
    for (; i < split.count[k]; ++i) {
      w[k].Put(codes, lengths, s[k][i]);
      w[k].Flush();
    }
    sizes[k] = w[k].Finish();
  }
  return sizes;
}

}  // namespace

double HuffmanBitsPerSymbol(std::span<const uint64_t, 256> counts) {
  Counts c;
  uint64_t total = 0;
  int distinct = 0;
  for (int s = 0; s < 256; ++s) {
    c[s] = counts[s];
    total += counts[s];
    distinct += counts[s] != 0;
  }
  if (distinct <= 1) return 0.0;
  Lengths lengths = LimitedLengths(c);
  uint64_t bits = 0;
  for (int s = 0; s < 256; ++s) bits += c[s] * lengths[s];
  return static_cast<double>(bits) / static_cast<double>(total);
}

size_t HuffmanBound(size_t size) {
  // The streams are encoded in separate regions (StreamBound + 8 bytes each)
  // and then moved together.
  return kHeaderBytes + (size * kHuffmanMaxCodeLength + 7) / 8 + kStreams * (1 + 8) + kPaddingBytes;
}

Result<size_t> HuffmanCompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  if (dst.size() < HuffmanBound(src.size())) return Status::Internal("huffman output buffer too small");
  Counts counts = Histogram(src);
  int distinct = 0, last = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) ++distinct, last = s;
  if (distinct <= 1) {
    dst[0] = 0;
    dst[1] = static_cast<uint8_t>(last);
    return size_t{2};
  }
  Lengths lengths = LimitedLengths(counts);
  std::array<uint16_t, 256> codes = ReversedCanonicalCodes(lengths);

  uint8_t* out = dst.data();
  out[0] = 1;
  for (int s = 0; s < 256; s += 2) out[1 + s / 2] = static_cast<uint8_t>(lengths[s] | (lengths[s + 1] << 4));
  StreamSplit split = Split(src.size());
  size_t start[kStreams];
  size_t region = kHeaderBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    start[k] = region;
    region += StreamBound(split.count[k]) + 8;
  }
  std::array<size_t, kStreams> sizes = EncodeStreams(src.data(), split, codes, lengths, out, start);
  size_t pos = kHeaderBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    if (pos != start[k]) std::memmove(out + pos, out + start[k], sizes[k]);
    if (k + 1 < kStreams) StoreLE32(out + 1 + kLengthTableBytes + 4 * k, static_cast<uint32_t>(sizes[k]));
    pos += sizes[k];
  }
  std::memset(out + pos, 0, kPaddingBytes);
  return pos + kPaddingBytes;
}

Status HuffmanDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  if (src.empty()) return Status::Corruption("huffman payload is empty");
  if (src[0] == 0) {
    if (src.size() != 2) return Status::Corruption("huffman single-symbol payload is not 2 bytes");
    if (!dst.empty()) std::memset(dst.data(), src[1], dst.size());
    return Status::Ok();
  }
  if (src[0] != 1) return Status::Corruption("huffman payload has unknown mode " + std::to_string(src[0]));
  if (src.size() < kHeaderBytes + kPaddingBytes) return Status::Corruption("huffman payload shorter than its header");

  // Code lengths must describe a complete prefix code.
  Lengths lengths{};
  uint32_t kraft = 0;
  int used = 0;
  for (int s = 0; s < 256; ++s) {
    uint8_t packed = src[1 + s / 2];
    lengths[s] = (s & 1) ? packed >> 4 : packed & 15;
    if (lengths[s] > kHuffmanMaxCodeLength) return Status::Corruption("huffman code length above 11");
    if (lengths[s]) {
      kraft += kKraftTotal >> lengths[s];
      ++used;
    }
  }
  if (used < 2 || kraft != kKraftTotal) return Status::Corruption("huffman code lengths do not form a complete code");

  // Decode tables, indexed by the next 12 bits of a stream. `single` gives
  // one (symbol, length); `pair` gives up to two symbols whose codes both
  // fit in those 12 bits: symbol 1 | symbol 2 << 8 | count << 16 | bits << 24.
  std::array<uint16_t, kTableSize> single;
  std::array<uint16_t, 256> codes = ReversedCanonicalCodes(lengths);
  for (int s = 0; s < 256; ++s) {
    if (!lengths[s]) continue;
    uint16_t entry = static_cast<uint16_t>(s | (lengths[s] << 8));
    for (uint32_t fill = codes[s]; fill < kTableSize; fill += 1u << lengths[s]) single[fill] = entry;
  }
  std::array<uint32_t, kTableSize> pair;
  for (uint32_t index = 0; index < kTableSize; ++index) {
    uint32_t first = single[index], first_len = first >> 8;
    uint32_t second = single[index >> first_len], second_len = second >> 8;
    if (first_len + second_len <= kTableBits)
      pair[index] = (first & 0xff) | (second & 0xff) << 8 | 2u << 16 | (first_len + second_len) << 24;
    else
      pair[index] = (first & 0xff) | 1u << 16 | first_len << 24;
  }

  // Stream boundaries.
  const uint8_t* base = src.data();
  size_t stream_begin[kStreams], stream_end[kStreams];
  size_t pos = kHeaderBytes;
  const size_t data_end = src.size() - kPaddingBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    size_t bytes = k + 1 < kStreams ? LoadLE32(base + 1 + kLengthTableBytes + 4 * k) : data_end - std::min(pos, data_end);
    if (pos > data_end || bytes > data_end - pos) return Status::Corruption("huffman stream sizes exceed the payload");
    stream_begin[k] = pos;
    stream_end[k] = pos + bytes;
    pos += bytes;
  }
  for (size_t i = data_end; i < src.size(); ++i)
    if (base[i]) return Status::Corruption("huffman payload padding is not zero");

  // Bit positions are absolute within src. A stream may be read while its
  // position is at most its end: the read then stays inside src, thanks to
  // the padding.
  StreamSplit split = Split(dst.size());
  uint64_t bit[kStreams], end_bit[kStreams];
  uint8_t* out[kStreams];
  for (size_t k = 0; k < kStreams; ++k) {
    bit[k] = uint64_t{stream_begin[k]} * 8;
    end_bit[k] = uint64_t{stream_end[k]} * 8;
    out[k] = dst.data() + split.begin[k];
  }
  uint8_t* out_end[kStreams];
  for (size_t k = 0; k < kStreams; ++k) out_end[k] = out[k] + split.count[k];
  // Two symbols per lookup where they fit; always stores two bytes, so it
  // runs while every stream has room for two.
  auto step_pair = [&](size_t k) {
    uint64_t w = LoadLE64(base + (bit[k] >> 3)) >> (bit[k] & 7);
    uint32_t e = pair[w & (kTableSize - 1)];
    StoreLE16(out[k], static_cast<uint16_t>(e));
    out[k] += (e >> 16) & 0xff;
    bit[k] += e >> 24;
  };
  auto step_single = [&](size_t k) {
    uint64_t w = LoadLE64(base + (bit[k] >> 3)) >> (bit[k] & 7);
    uint16_t e = single[w & (kTableSize - 1)];
    *out[k]++ = static_cast<uint8_t>(e);
    bit[k] += e >> 8;
  };
  // A round is one step of each stream. The bounds are checked once per
  // batch of rounds, as many as cannot break them: a step reads at most
  // kTableBits bits and writes at most two bytes.
  for (;;) {
    if ((bit[0] > end_bit[0]) | (bit[1] > end_bit[1]) | (bit[2] > end_bit[2]) | (bit[3] > end_bit[3]))
      return Status::Corruption("huffman stream runs past its end");
    size_t rounds = SIZE_MAX;
    for (size_t k = 0; k < kStreams; ++k) {
      size_t by_output = static_cast<size_t>(out_end[k] - out[k]) / 2;
      size_t by_input = static_cast<size_t>((end_bit[k] - bit[k]) / kTableBits) + 1;
      rounds = std::min({rounds, by_output, by_input});
    }
    if (rounds == 0) break;
    for (size_t r = 0; r < rounds; ++r) {
      step_pair(0);
      step_pair(1);
      step_pair(2);
      step_pair(3);
    }
  }
  for (size_t k = 0; k < kStreams; ++k) {
    while (out[k] < out_end[k]) {
      if (bit[k] > end_bit[k]) return Status::Corruption("huffman stream runs past its end");
      step_single(k);
    }
    if ((bit[k] + 7) / 8 != stream_end[k])
      return Status::Corruption("huffman stream " + std::to_string(k) + " does not end where its size says");
    if ((bit[k] & 7) && (base[bit[k] >> 3] >> (bit[k] & 7)) != 0)
      return Status::Corruption("huffman stream " + std::to_string(k) + " has non-zero padding bits");
  }
  return Status::Ok();
}

}  // namespace vramflow
