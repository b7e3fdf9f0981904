// SPDX-License-Identifier: MIT
#include "codecs/huffman.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/cpu_features.h"
#include "common/endian.h"

namespace vramflow {
namespace {

constexpr size_t kStreams = 4;  // even: EncodeStreamsInline codes them two at a time
constexpr size_t kLengthTableBytes = kHuffmanLengthTableBytes;
constexpr size_t kHeaderBytes = 1 + kLengthTableBytes + 4 * (kStreams - 1);
constexpr size_t kPaddingBytes = 8;
constexpr uint32_t kKraftTotal = 1u << kHuffmanMaxCodeLength;

// Decode table entries, indexed by the next kTableBits bits of a stream:
// the bits the entry's codes take in bits 0-5, how many symbols it holds in
// bits 6-7 and up to kMaxSymbolsPerEntry symbols in bytes 1-3. A shift of
// a 64-bit word by the entry itself then drops the codes' bits (a shift
// takes its count modulo 64): the step's dependency chain is a mask, the
// table load and that shift.
constexpr unsigned kEntryBitsMask = 63;
constexpr unsigned kEntryCountShift = 6;
constexpr unsigned kEntrySymbolsShift = 8;
constexpr unsigned kTableBits = HuffmanDecoder::kTableBits;
constexpr uint32_t kTableSize = 1u << kTableBits;
constexpr uint32_t kMaxSymbolsPerEntry = 3;
static_assert(kTableBits <= kEntryBitsMask && kMaxSymbolsPerEntry <= 3);

using Counts = std::array<uint64_t, 256>;
using Lengths = std::array<uint8_t, 256>;

Counts Histogram(std::span<const uint8_t> src) {
  // Eight tables: a counter is incremented at most every eighth byte, so
  // runs of one value (a plane's common exponent) do not wait on the store
  // of the previous increment (four tables: 1.1 to 1.2x slower on float
  // planes, 2.7x where one value is 90% of the bytes).
  constexpr int kTables = 8;
  std::array<std::array<uint32_t, 256>, kTables> h{};
  const uint8_t* p = src.data();
  size_t n = src.size(), i = 0;
  for (; i + kTables <= n; i += kTables)
    for (int k = 0; k < kTables; ++k) ++h[k][p[i + k]];
  for (; i < n; ++i) ++h[0][p[i]];
  Counts counts{};
  for (int s = 0; s < 256; ++s)
    for (int k = 0; k < kTables; ++k) counts[s] += h[k][s];
  return counts;
}

// Counts of the bytes of `src` from counts of its 16-bit pairs (bytes 2i
// and 2i + 1) in `pair_counts`, 65536 counters that are zero on entry and
// again on return: one increment for two bytes. On a plane of few distinct
// values (bf16's exponent plane: 25 in the generator's model-like data,
// at most 64 in its first 16 KiB for this path) that is 1.3x as fast as
// Histogram; with about 100 (fp16, fp32) the counters no longer fit the
// first-level cache and it is slower, and where one value dominates, its
// pair's counter is one long chain of increments.
Counts CountByPairs(std::span<const uint8_t> src, uint32_t* pair_counts) {
  const uint8_t* p = src.data();
  const size_t n = src.size();
  size_t i = 0;
  // Four pairs per load, taken apart by shifts (with a load per pair,
  // compressing bf16's exponent plane took 1.03x as long).
  for (; i + 8 <= n; i += 8) {
    const uint64_t bytes = LoadLE64(p + i);
    ++pair_counts[bytes & 0xffff];
    ++pair_counts[(bytes >> 16) & 0xffff];
    ++pair_counts[(bytes >> 32) & 0xffff];
    ++pair_counts[bytes >> 48];
  }
  for (; i + 2 <= n; i += 2) ++pair_counts[LoadLE16(p + i)];
  Counts counts{};
  if (i < n) ++counts[p[i]];
  // Row b holds the pairs whose second byte is b: its sum counts b; its
  // columns, summed over the rows, count the first bytes.
  std::array<uint64_t, 256> first{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t* row = pair_counts + b * 256;
    uint64_t sum = 0;
    for (uint32_t a = 0; a < 256; ++a) {
      first[a] += row[a];
      sum += row[a];
    }
    if (sum == 0) continue;
    counts[b] += sum;
    std::memset(row, 0, 256 * sizeof(uint32_t));
  }
  for (int a = 0; a < 256; ++a) counts[a] += first[a];
  return counts;
}

// Whether CountByPairs pays for the rest of a plane whose first bytes have
// the counts `head` (of `head_size` bytes): few distinct values, none of
// them a quarter of the bytes.
bool PairCountingPays(const Counts& head, size_t head_size) {
  int distinct = 0;
  uint64_t most = 0;
  for (uint64_t c : head) {
    distinct += c != 0;
    most = std::max(most, c);
  }
  return distinct <= 64 && 4 * most <= head_size;
}

// The symbols present in `counts`, lightest first (ties by symbol), as keys
// count << 8 | symbol, sorted once for both BuildLengths and
// PackageMergeLengths. Returns how many; counts must be below 2^56, and
// their total too (a plane is at most a chunk, 64 MiB).
int SortedLeaves(const Counts& counts, uint64_t* keys) {
  int n = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) keys[n++] = counts[s] << 8 | static_cast<uint64_t>(s);
  std::sort(keys, keys + n);
  return n;
}
uint64_t LeafWeight(uint64_t key) { return key >> 8; }
int LeafSymbol(uint64_t key) { return static_cast<int>(key & 0xff); }

// Huffman code lengths for the n >= 2 sorted leaves `keys`, by repeatedly
// merging the two lightest nodes. With the leaves sorted, the merged nodes
// come out in order of weight too, so two queues replace a heap; nothing is
// allocated (the analysis prices several codes per chunk).
Lengths BuildLengths(const uint64_t* keys, int n) {
  // Nodes 0..n-1 are the leaves in that order, n..2n-2 the merged ones.
  std::array<uint64_t, 511> weight;
  std::array<int16_t, 511> parent;
  for (int i = 0; i < n; ++i) weight[i] = LeafWeight(keys[i]);
  int next_leaf = 0, next_merged = n, made = n;
  auto lightest = [&] {
    if (next_leaf < n && (next_merged == made || weight[next_leaf] <= weight[next_merged])) return next_leaf++;
    return next_merged++;
  };
  while (made < 2 * n - 1) {
    const int a = lightest(), b = lightest();
    weight[made] = weight[a] + weight[b];
    parent[a] = parent[b] = static_cast<int16_t>(made);
    ++made;
  }
  // Parents come after their children: depths from the root down.
  std::array<uint16_t, 511> depth;
  depth[2 * n - 2] = 0;
  for (int i = 2 * n - 3; i >= 0; --i) depth[i] = static_cast<uint16_t>(depth[parent[i]] + 1);
  Lengths lengths{};
  for (int i = 0; i < n; ++i) lengths[LeafSymbol(keys[i])] = static_cast<uint8_t>(std::min<int>(depth[i], 255));
  return lengths;
}

// Optimal lengths of at most kHuffmanMaxCodeLength bits for the n >= 2
// sorted leaves `keys`, by package-merge: level by level, from the longest
// codes up, the two lightest items of the level below are packaged into one
// and merged with the symbols; a symbol's length is the number of the
// 2n - 2 lightest top-level items it is part of. Float exponent planes,
// whose rare exponents want 15 to 20 bits, lose about 0.5% to a crude limit
// (halving counts until the tree fits).
//
// Only weights are kept per level. The first k items of a level are the
// lightest leaves and the lightest packages (both lists are in order), so
// how many of them are leaves says which: a level records that count for
// every k, and the lengths follow from the top level down. The merge runs
// without branches: both lists end in sentinels that lose every comparison
// with a real item. (With a branch per item, and a sort per function,
// pricing a float plane's code took 1.2 to 1.3x as long on fp32, fp16 and
// adam-v planes.)
Lengths PackageMergeLengths(const uint64_t* keys, int n) {
  // A real item, leaf or package, weighs at most the counts' total, which is
  // below 2^56: far below both sentinels.
  constexpr uint64_t kNoLeaf = (uint64_t{1} << 62) + 1;  // heavier than any package, real or not
  constexpr uint64_t kNoItem = uint64_t{1} << 61;        // two make a package no real leaf outweighs
  std::array<uint64_t, 257> leaf_weight;
  for (int i = 0; i < n; ++i) leaf_weight[i] = LeafWeight(keys[i]);
  leaf_weight[n] = kNoLeaf;
  // Each level holds at most 2n - 1 items: n leaves and (2n - 2) / 2
  // packages; two more for the sentinels.
  std::array<uint64_t, 513> weights_a, weights_b;
  uint64_t* below = weights_a.data();
  uint64_t* level_weight = weights_b.data();
  // leaves_first[level][k]: how many of the level's first k items are leaves.
  std::array<std::array<uint16_t, 512>, kHuffmanMaxCodeLength> leaves_first;
  std::copy(leaf_weight.begin(), leaf_weight.begin() + n, below);
  for (int k = 0; k <= n; ++k) leaves_first[0][k] = static_cast<uint16_t>(k);
  int below_size = n;
  for (unsigned level = 1; level < kHuffmanMaxCodeLength; ++level) {
    const int packages = below_size / 2;
    below[2 * packages] = below[2 * packages + 1] = kNoItem;
    uint16_t* first = leaves_first[level].data();
    first[0] = 0;
    int i = 0, p = 0;
    const int items = n + packages;
    for (int out = 0; out < items; ++out) {  // a leaf before a package of the same weight
      const uint64_t leaf = leaf_weight[i];
      const uint64_t package = below[2 * p] + below[2 * p + 1];
      const bool take_leaf = leaf <= package;
      level_weight[out] = take_leaf ? leaf : package;
      i += take_leaf;
      p += !take_leaf;
      first[out + 1] = static_cast<uint16_t>(i);
    }
    std::swap(below, level_weight);
    below_size = items;
  }
  Lengths lengths{};
  int take = 2 * n - 2;
  for (int level = kHuffmanMaxCodeLength - 1; level >= 0 && take > 0; --level) {
    const int leaf_count = leaves_first[level][take];
    for (int k = 0; k < leaf_count; ++k) ++lengths[LeafSymbol(keys[k])];
    take = 2 * (take - leaf_count);  // the items below that the packages taken hold
  }
  return lengths;
}

// Lengths no longer than kHuffmanMaxCodeLength for `counts` (at least two
// non-zero): the Huffman code when it is short enough, otherwise the best
// code that is.
Lengths LimitedLengths(const Counts& counts) {
  uint64_t keys[256];
  const int n = SortedLeaves(counts, keys);
  Lengths lengths = BuildLengths(keys, n);
  if (*std::max_element(lengths.begin(), lengths.end()) <= kHuffmanMaxCodeLength) return lengths;
  return PackageMergeLengths(keys, n);
}

// Canonical codes from lengths, bit-reversed for LSB-first output: codes
// of one length are consecutive in symbol order, and each length's first
// code follows the last of the length before, shifted left. Lengths must
// be at most kHuffmanMaxCodeLength.
std::array<uint16_t, 256> ReversedCanonicalCodes(const Lengths& lengths) {
  std::array<uint32_t, kHuffmanMaxCodeLength + 1> per_length{};
  for (int s = 0; s < 256; ++s) ++per_length[lengths[s]];
  std::array<uint32_t, kHuffmanMaxCodeLength + 1> next_code{};
  uint32_t code = 0;
  for (unsigned len = 1; len <= kHuffmanMaxCodeLength; ++len) {
    next_code[len] = code;
    code = (code + per_length[len]) << 1;
  }
  std::array<uint16_t, 256> codes{};
  for (int s = 0; s < 256; ++s) {
    const unsigned len = lengths[s];
    if (!len) continue;
    const uint32_t c = next_code[len]++;
    // Reverse the low `len` bits: reverse all 16, then drop the low 16 - len.
    uint32_t r = c;
    r = (r & 0x5555) << 1 | (r >> 1 & 0x5555);
    r = (r & 0x3333) << 2 | (r >> 2 & 0x3333);
    r = (r & 0x0f0f) << 4 | (r >> 4 & 0x0f0f);
    r = (r & 0x00ff) << 8 | (r >> 8 & 0x00ff);
    codes[s] = static_cast<uint16_t>(r >> (16 - len));
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

// A pair table entry: the total length of the codes of symbols a then b in
// the low six bits, the codes (a's bits first, as the stream takes them)
// above. The writer adds whole entries to its bit count: what lies above the
// length is a multiple of 64, which shifts by the count ignore and the next
// flush clears, so the length needs no taking apart.
constexpr unsigned kPairCodeShift = 6;
static_assert(2 * kHuffmanMaxCodeLength < (1u << kPairCodeShift));
static_assert(2 * kHuffmanMaxCodeLength + kPairCodeShift <= 32);

// One stream's bit writer: codes are OR-ed into a 64-bit accumulator and
// whole bytes stored with one unaligned 8-byte store, so the stream's region
// must have 8 writable bytes beyond what the stream needs. The low six bits
// of `bits` count the bits held; after PutPair, multiples of 64 above them
// until the next Flush.
struct BitWriter {
  uint8_t* out;
  uint64_t acc = 0;
  unsigned bits = 0;

  void Put(const std::array<uint16_t, 256>& codes, const Lengths& lengths, uint8_t s) {
    acc |= uint64_t{codes[s]} << (bits & 63);
    bits += lengths[s];
  }
  // The two symbols at `two`, from a pair table (kPairCodeShift).
  void PutPair(const uint32_t* pairs, const uint8_t* two) {
    const uint32_t entry = pairs[LoadLE16(two)];
    acc |= uint64_t{entry >> kPairCodeShift} << (bits & 63);
    bits += entry;
  }
  // At most 4 x 11 + 7 bits are held between flushes, so the count is
  // below 64.
  void Flush() {
    StoreLE64(out, acc);
    const unsigned whole_bytes_bits = bits & 56;
    out += whole_bytes_bits >> 3;
    acc >>= whole_bytes_bits;
    bits &= 7;
  }
  // Stores the last partial byte, if any: `out` is then the stream's end.
  void Finish() {
    if (bits & 63) {
      StoreLE64(out, acc);
      ++out;
    }
    bits = 0;
  }
};

// Largest encoding of `count` symbols by one stream.
size_t StreamBound(size_t count) { return (count * kHuffmanMaxCodeLength + 7) / 8; }

// Encodes streams a (na symbols) and b (nb) side by side, four symbols of
// each per round: two independent dependency chains. Two streams at a time,
// not all four: a writer, its source and the loop fit the registers then
// (four spill to the stack: 1.09 to 1.19x slower on fp32, fp16 and bf16
// planes, both built with BMI2). With a
// filled pair table (kByPairs) the rounds look symbols up two at a time.
template <bool kByPairs>
[[gnu::always_inline]] inline void EncodeTwoStreams(const uint8_t* a, size_t na, const uint8_t* b, size_t nb,
                                                    const std::array<uint16_t, 256>& codes, const Lengths& lengths,
                                                    const uint32_t* pairs, BitWriter& wa, BitWriter& wb) {
  const size_t common = std::min(na, nb) & ~size_t{3};
  if constexpr (kByPairs) {
    // b's symbols at a fixed distance from a's: one pointer fewer to keep
    // in a register.
    const ptrdiff_t b_from_a = b - a;
    for (const uint8_t *p = a, *end = a + common; p != end; p += 4) {  // 4 x 11 + 7 bits < 64
      wa.PutPair(pairs, p);
      wb.PutPair(pairs, p + b_from_a);
      wa.PutPair(pairs, p + 2);
      wb.PutPair(pairs, p + b_from_a + 2);
      wa.Flush();
      wb.Flush();
    }
  }
  for (size_t i = 0; !kByPairs && i < common; i += 4) {
    for (size_t j = i; j < i + 4; ++j) {
      wa.Put(codes, lengths, a[j]);
      wb.Put(codes, lengths, b[j]);
    }
    wa.Flush();
    wb.Flush();
  }
  for (size_t i = common; i < na; ++i) {
    wa.Put(codes, lengths, a[i]);
    wa.Flush();
  }
  for (size_t i = common; i < nb; ++i) {
    wb.Put(codes, lengths, b[i]);
    wb.Flush();
  }
}

// Encodes the four streams of `split` from `src`, stream k starting at
// out + start[k]; returns their sizes. Each stream has room for its bytes and
// 8 more: a region of StreamBound + 8 bytes, or, where the streams' sizes are
// known and each is at least 8 bytes, the streams end to end.
// A writer's last stores reach up to 8 bytes past its stream's end, into the
// next stream when they are end to end. So streams 0 and 2 are coded first:
// what they leave past their ends is overwritten by streams 1 and 3, coded
// after them, and the first bytes of stream 2, which stream 1's last stores
// reach, are put back.
template <bool kByPairs>
[[gnu::always_inline]] inline std::array<size_t, kStreams> EncodeStreamsInline(
    const uint8_t* src, const StreamSplit& split, const std::array<uint16_t, 256>& codes, const Lengths& lengths,
    const uint32_t* pairs, uint8_t* out, const size_t* start) {
  static_assert(kStreams == 4);
  BitWriter w[kStreams] = {{out + start[0]}, {out + start[1]}, {out + start[2]}, {out + start[3]}};
  EncodeTwoStreams<kByPairs>(src + split.begin[0], split.count[0], src + split.begin[2], split.count[2], codes, lengths,
                             pairs, w[0], w[2]);
  w[0].Finish();
  w[2].Finish();
  uint8_t stream2_head[8];
  std::memcpy(stream2_head, out + start[2], sizeof(stream2_head));
  EncodeTwoStreams<kByPairs>(src + split.begin[1], split.count[1], src + split.begin[3], split.count[3], codes, lengths,
                             pairs, w[1], w[3]);
  w[1].Finish();
  w[3].Finish();
  std::memcpy(out + start[2], stream2_head, sizeof(stream2_head));
  std::array<size_t, kStreams> sizes;
  for (size_t k = 0; k < kStreams; ++k) sizes[k] = static_cast<size_t>(w[k].out - (out + start[k]));
  return sizes;
}

// The same loops compiled twice: for baseline x86-64, and with BMI2, whose
// shifts take their count from any register (a shift by `bits` otherwise
// moves it to CL first; 1.07 to 1.17x faster on fp32, fp16 and bf16
// planes). The bytes are the same either way.
template <bool kByPairs>
std::array<size_t, kStreams> EncodeStreamsBaseline(const uint8_t* src, const StreamSplit& split,
                                                   const std::array<uint16_t, 256>& codes, const Lengths& lengths,
                                                   const uint32_t* pairs, uint8_t* out, const size_t* start) {
  return EncodeStreamsInline<kByPairs>(src, split, codes, lengths, pairs, out, start);
}

#if defined(__x86_64__)
template <bool kByPairs>
__attribute__((target("bmi2"))) std::array<size_t, kStreams> EncodeStreamsBmi2(
    const uint8_t* src, const StreamSplit& split, const std::array<uint16_t, 256>& codes, const Lengths& lengths,
    const uint32_t* pairs, uint8_t* out, const size_t* start) {
  return EncodeStreamsInline<kByPairs>(src, split, codes, lengths, pairs, out, start);
}
#endif

template <bool kByPairs>
std::array<size_t, kStreams> EncodeStreams(bool bmi2, const uint8_t* src, const StreamSplit& split,
                                           const std::array<uint16_t, 256>& codes, const Lengths& lengths,
                                           const uint32_t* pairs, uint8_t* out, const size_t* start) {
#if defined(__x86_64__)
  if (bmi2) return EncodeStreamsBmi2<kByPairs>(src, split, codes, lengths, pairs, out, start);
#endif
  return EncodeStreamsBaseline<kByPairs>(src, split, codes, lengths, pairs, out, start);
}

// Fills the pair table's entries for every symbol b in `present` (n
// symbols, increasing) following every symbol a from present[0] to
// present[n - 1]; the entries of absent a are written too, and never looked
// up. Row by row: a row (one b) is the entries of consecutive a, side by
// side, where filling pair by pair (a then b, b fastest) stored across 256
// rows in turn: 32 us for 100 symbols, 211 us for 256, as long as coding a
// 256 KiB plane. The entry of a then b is
//   (code[a] << kPairCodeShift | length[a]) + length[b] + (code[b] << (length[a] + kPairCodeShift)).
void FillPairCodesBaseline(const uint8_t* present, int n, const std::array<uint16_t, 256>& codes,
                           const Lengths& lengths, uint32_t* pairs) {
  const int low = present[0], high = present[n - 1];
  for (int j = 0; j < n; ++j) {
    const uint8_t b = present[j];
    uint32_t* row = pairs + (uint32_t{b} << 8);
    for (int a = low; a <= high; ++a)
      row[a] = (uint32_t{codes[a]} << kPairCodeShift | lengths[a]) + lengths[b] +
               (uint32_t{codes[b]} << (lengths[a] + kPairCodeShift));
  }
}

#if defined(__x86_64__)
// The same entries, eight a at a time (VPSLLVD shifts each lane by its own
// count): 1.7 us for 100 symbols, 9.7 us for 256.
__attribute__((target("avx2"))) void FillPairCodesAvx2(const uint8_t* present, int n,
                                                       const std::array<uint16_t, 256>& codes, const Lengths& lengths,
                                                       uint32_t* pairs) {
  const int low = present[0], high = present[n - 1];
  // Per a: the part of the entry a alone gives, and the shift of b's code.
  alignas(32) uint32_t own[256];
  alignas(32) uint32_t shift[256];
  for (int a = low; a <= high; ++a) {
    own[a] = uint32_t{codes[a]} << kPairCodeShift | lengths[a];
    shift[a] = lengths[a] + kPairCodeShift;
  }
  for (int j = 0; j < n; ++j) {
    const uint8_t b = present[j];
    uint32_t* row = pairs + (uint32_t{b} << 8);
    const __m256i code_b = _mm256_set1_epi32(codes[b]);
    const __m256i length_b = _mm256_set1_epi32(lengths[b]);
    int a = low;
    for (; a + 8 <= high + 1; a += 8) {
      const __m256i own_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(own + a));
      const __m256i shift_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(shift + a));
      const __m256i entry = _mm256_add_epi32(_mm256_add_epi32(own_a, length_b), _mm256_sllv_epi32(code_b, shift_a));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + a), entry);
    }
    for (; a <= high; ++a) row[a] = own[a] + lengths[b] + (uint32_t{codes[b]} << shift[a]);
  }
}
#endif

void FillPairCodes(bool avx2, const uint8_t* present, int n, const std::array<uint16_t, 256>& codes,
                   const Lengths& lengths, uint32_t* pairs) {
#if defined(__x86_64__)
  if (avx2) return FillPairCodesAvx2(present, n, codes, lengths, pairs);
#endif
  FillPairCodesBaseline(present, n, codes, lengths, pairs);
}

// The decoder's fast loop, in rounds. A round loads each stream's next 8
// bytes afresh from its bit position (a stream's state is only that position
// and its output pointer, so that the loop's values fit the registers: with
// a bit buffer and a count of valid bits kept too, they spilled to the stack)
// and takes kStepsPerRound steps of at most kTableBits bits from
// the 57 or more bits the load gives. A step stores 4 bytes, of which the
// entry's count are symbols (the rest is overwritten by the next steps).
constexpr size_t kStepsPerRound = 4;
static_assert(kStepsPerRound * kTableBits <= 57);
// A stream's load moves at most this far a round.
constexpr size_t kRoundAdvanceBytes = (kStepsPerRound * kTableBits + 7) / 8;
constexpr size_t kRoundOutputBytes = kStepsPerRound * kMaxSymbolsPerEntry + 1;  // a round's stores reach this far

struct DecodeState {
  uint64_t bit[kStreams];  // each stream's next bit, counted from the payload's first
  uint8_t* out[kStreams];
};

// `rounds` rounds, which the caller has checked stay inside the payload and
// the output. Each stream's steps are one dependency chain (mask, table load,
// shift); the four chains are independent, and the processor overlaps them.
[[gnu::always_inline]] inline void DecodeRoundsInline(const uint8_t* payload, const uint32_t* table, size_t rounds,
                                                      DecodeState& state) {
  DecodeState s = state;  // a local copy, which the compiler keeps in registers
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < kStreams; ++k) {
      uint64_t buf = LoadLE64(payload + (s.bit[k] >> 3)) >> (s.bit[k] & 7);
      for (size_t i = 0; i < kStepsPerRound; ++i) {
        const uint32_t e = table[buf & (kTableSize - 1)];
        buf >>= e & kEntryBitsMask;
        StoreLE32(s.out[k], e >> kEntrySymbolsShift);
        s.out[k] += (e >> kEntryCountShift) & 3;
        s.bit[k] += e & kEntryBitsMask;
      }
    }
  }
  state = s;
}

// Built twice, like the encoder's loops.
void DecodeRoundsBaseline(const uint8_t* payload, const uint32_t* table, size_t rounds, DecodeState& state) {
  DecodeRoundsInline(payload, table, rounds, state);
}

#if defined(__x86_64__)
__attribute__((target("bmi2"))) void DecodeRoundsBmi2(const uint8_t* payload, const uint32_t* table, size_t rounds,
                                                      DecodeState& state) {
  DecodeRoundsInline(payload, table, rounds, state);
}
#endif

void DecodeRounds(bool bmi2, const uint8_t* payload, const uint32_t* table, size_t rounds, DecodeState& state) {
#if defined(__x86_64__)
  if (bmi2) return DecodeRoundsBmi2(payload, table, rounds, state);
#endif
  DecodeRoundsBaseline(payload, table, rounds, state);
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
  // Where the streams' sizes are not known in advance, they are encoded in
  // separate regions (StreamBound + 8 bytes each) and then moved together.
  return kHeaderBytes + (size * kHuffmanMaxCodeLength + 7) / 8 + kStreams * (1 + 8) + kPaddingBytes;
}

HuffmanEncoder::HuffmanEncoder(IsaKernel kernel)
    : bmi2_(UsesBmi2(kernel)), avx2_(UsesAvx2(kernel)), runs_here_(KernelRunsHere(kernel)) {}

Result<size_t> HuffmanCompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  return HuffmanEncoder().Compress(src, dst);
}

void HuffmanEncoder::ClearPairCodes() {
  int rows = 0;
  for (bool coded : coded_) rows += coded;
  if (rows > 128) {
    std::fill(pairs_.begin(), pairs_.end(), 0);
  } else if (rows > 0) {
    // FillPairCodes wrote each coded row from coded_low_ to coded_high_.
    for (int b = 0; b < 256; ++b)
      if (coded_[b]) std::fill(pairs_.begin() + (b << 8) + coded_low_, pairs_.begin() + (b << 8) + coded_high_ + 1, 0);
  }
  coded_.fill(false);
  coded_low_ = 255;
  coded_high_ = 0;
}

Result<size_t> HuffmanEncoder::Compress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  if (dst.size() < HuffmanBound(src.size())) return Status::Internal("huffman output buffer too small");
  if (!runs_here_) return Status::InvalidArgument("this CPU has no BMI2");
  const StreamSplit split = Split(src.size());
  // Counted stream by stream where that costs little (not by pairs, and
  // streams of a few KiB or more): each stream's size is then known before it
  // is coded, and it is coded in its place, not in a region of its own that
  // is moved next to the others afterwards.
  static_assert(kPairCountingMinBytes >= kCodeInPlaceMinBytes);
  std::array<Counts, kStreams> stream_counts;
  Counts counts{};
  bool counted_per_stream = false;
  if (src.size() >= kPairCountingMinBytes) {
    // A first part decides how the rest is counted.
    const size_t head = kPairCountingSampleBytes;
    const Counts head_counts = Histogram(src.first(head));
    if (PairCountingPays(head_counts, head)) {
      AllocatePairTable();
      ClearPairCodes();
      counts = CountByPairs(src.subspan(head), pairs_.data());
      for (int s = 0; s < 256; ++s) counts[s] += head_counts[s];
    } else {
      static_assert(kPairCountingMinBytes / kStreams > kPairCountingSampleBytes);  // stream 0 holds the head
      stream_counts[0] = Histogram(src.subspan(head, split.count[0] - head));
      for (int s = 0; s < 256; ++s) stream_counts[0][s] += head_counts[s];
      for (size_t k = 1; k < kStreams; ++k) stream_counts[k] = Histogram(src.subspan(split.begin[k], split.count[k]));
      counted_per_stream = true;
    }
  } else if (src.size() >= kCodeInPlaceMinBytes) {
    for (size_t k = 0; k < kStreams; ++k) stream_counts[k] = Histogram(src.subspan(split.begin[k], split.count[k]));
    counted_per_stream = true;
  } else {
    counts = Histogram(src);
  }
  if (counted_per_stream)
    for (size_t k = 0; k < kStreams; ++k)
      for (int s = 0; s < 256; ++s) counts[s] += stream_counts[k][s];
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
  size_t start[kStreams];
  size_t expected[kStreams];  // the streams' sizes, where counted per stream
  size_t at = kHeaderBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    start[k] = at;
    if (counted_per_stream) {
      uint64_t bits = 0;
      for (int s = 0; s < 256; ++s) bits += stream_counts[k][s] * lengths[s];
      expected[k] = static_cast<size_t>((bits + 7) / 8);
      at += expected[k];
    } else {
      at += StreamBound(split.count[k]) + 8;
    }
  }
  // The pair table, filled for the symbols present (no other entry is
  // looked up), where the pairs of them are at most a quarter as many as the
  // symbols: payloads of 256 KiB or more always (all chunk sizes from 1 MiB).
  const bool by_pairs = 4 * size_t(distinct) * size_t(distinct) <= src.size();
  uint8_t present[256];
  int n = 0;
  for (int s = 0; s < 256; ++s)
    if (lengths[s]) present[n++] = static_cast<uint8_t>(s);
  if (by_pairs) {
    AllocatePairTable();
    FillPairCodes(avx2_, present, n, codes, lengths, pairs_.data());
  }
  std::array<size_t, kStreams> sizes =
      by_pairs ? EncodeStreams<true>(bmi2_, src.data(), split, codes, lengths, pairs_.data(), out, start)
               : EncodeStreams<false>(bmi2_, src.data(), split, codes, lengths, nullptr, out, start);
  if (by_pairs) {  // for ClearPairCodes
    for (int i = 0; i < n; ++i) coded_[present[i]] = true;
    coded_low_ = std::min<int>(coded_low_, present[0]);
    coded_high_ = std::max<int>(coded_high_, present[n - 1]);
  }
  size_t pos = kHeaderBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    if (counted_per_stream && sizes[k] != expected[k])
      return Status::Internal("huffman stream " + std::to_string(k) + " came out at " + std::to_string(sizes[k]) +
                              " bytes, counted " + std::to_string(expected[k]));
    if (pos != start[k]) std::memmove(out + pos, out + start[k], sizes[k]);
    if (k + 1 < kStreams) StoreLE32(out + 1 + kLengthTableBytes + 4 * k, static_cast<uint32_t>(sizes[k]));
    pos += sizes[k];
  }
  std::memset(out + pos, 0, kPaddingBytes);
  return pos + kPaddingBytes;
}

HuffmanDecoder::HuffmanDecoder(IsaKernel kernel)
    : table_(kTableSize), bmi2_(UsesBmi2(kernel)), runs_here_(KernelRunsHere(kernel)) {}

Status HuffmanDecoder::BuildTable(std::span<const uint8_t, kLengthTableBytes> packed) {
  if (built_ && std::equal(packed.begin(), packed.end(), packed_lengths_.begin())) return Status::Ok();
  built_ = false;
  // Code lengths must describe a complete prefix code.
  uint32_t kraft = 0;
  int used = 0;
  for (int s = 0; s < 256; ++s) {
    uint8_t byte = packed[s / 2];
    lengths_[s] = (s & 1) ? byte >> 4 : byte & 15;
    if (lengths_[s] > kHuffmanMaxCodeLength) return Status::Corruption("huffman code length above 11");
    if (lengths_[s]) {
      kraft += kKraftTotal >> lengths_[s];
      ++used;
    }
  }
  if (used < 2 || kraft != kKraftTotal) return Status::Corruption("huffman code lengths do not form a complete code");

  // One symbol per index first (symbol | length << 8): a code of length L
  // fills every index whose low L bits are that code.
  std::array<uint16_t, kTableSize> single;
  const std::array<uint16_t, 256> codes = ReversedCanonicalCodes(lengths_);
  for (int s = 0; s < 256; ++s) {
    if (!lengths_[s]) continue;
    const uint16_t entry = static_cast<uint16_t>(s | (lengths_[s] << 8));
    for (uint32_t fill = codes[s]; fill < kTableSize; fill += 1u << lengths_[s]) single[fill] = entry;
  }
  // Then as many of the following symbols as fit in the index's bits, up to
  // kMaxSymbolsPerEntry: the bits after the first code, shifted down, index
  // `single` correctly for any code no longer than those bits.
  for (uint32_t index = 0; index < kTableSize; ++index) {
    uint32_t symbols = 0, count = 0, bits = 0;
    while (count < kMaxSymbolsPerEntry) {
      const uint32_t next = single[index >> bits];
      const uint32_t length = next >> 8;
      if (bits + length > kTableBits) break;
      symbols |= (next & 0xff) << (8 * count);
      bits += length;
      ++count;
    }
    table_[index] = symbols << kEntrySymbolsShift | count << kEntryCountShift | bits;
  }
  std::copy(packed.begin(), packed.end(), packed_lengths_.begin());
  built_ = true;
  return Status::Ok();
}

Status HuffmanDecoder::Decompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  if (!runs_here_) return Status::InvalidArgument("this CPU has no BMI2");
  if (src.empty()) return Status::Corruption("huffman payload is empty");
  if (src[0] == 0) {
    if (src.size() != 2) return Status::Corruption("huffman single-symbol payload is not 2 bytes");
    if (!dst.empty()) std::memset(dst.data(), src[1], dst.size());
    return Status::Ok();
  }
  if (src[0] != 1) return Status::Corruption("huffman payload has unknown mode " + std::to_string(src[0]));
  if (src.size() < kHeaderBytes + kPaddingBytes) return Status::Corruption("huffman payload shorter than its header");
  VF_RETURN_IF_ERROR(BuildTable(src.subspan<1, kLengthTableBytes>()));
  const uint32_t* table = table_.data();

  // Stream boundaries.
  const uint8_t* base = src.data();
  size_t stream_begin[kStreams], stream_end[kStreams];
  size_t pos = kHeaderBytes;
  const size_t data_end = src.size() - kPaddingBytes;
  for (size_t k = 0; k < kStreams; ++k) {
    size_t bytes =
        k + 1 < kStreams ? LoadLE32(base + 1 + kLengthTableBytes + 4 * k) : data_end - std::min(pos, data_end);
    if (pos > data_end || bytes > data_end - pos) return Status::Corruption("huffman stream sizes exceed the payload");
    stream_begin[k] = pos;
    stream_end[k] = pos + bytes;
    pos += bytes;
  }
  for (size_t i = data_end; i < src.size(); ++i)
    if (base[i]) return Status::Corruption("huffman payload padding is not zero");

  StreamSplit split = Split(dst.size());
  uint8_t* out[kStreams];
  uint8_t* out_end[kStreams];
  for (size_t k = 0; k < kStreams; ++k) {
    out[k] = dst.data() + split.begin[k];
    out_end[k] = out[k] + split.count[k];
  }

  // The fast loop (DecodeRounds).
  DecodeState state;
  for (size_t k = 0; k < kStreams; ++k) {
    state.bit[k] = uint64_t{stream_begin[k]} * 8;
    state.out[k] = out[k];
  }
  const size_t load_limit = src.size() - 8;  // a round may load at most from here
  // Bounds are checked once per batch of rounds, as many as cannot break
  // them: every load stays inside src, every store inside the stream's own
  // output, and a stream that has run past its end is caught after the
  // batch (it has then only read the next stream's bytes or the padding).
  for (;;) {
    size_t rounds = SIZE_MAX;
    for (size_t k = 0; k < kStreams; ++k) {
      if (state.bit[k] > uint64_t{stream_end[k]} * 8) return Status::Corruption("huffman stream runs past its end");
      const size_t by_output = static_cast<size_t>(out_end[k] - state.out[k]) / kRoundOutputBytes;
      const size_t at = static_cast<size_t>(state.bit[k] >> 3);
      const size_t by_load = at > load_limit ? 0 : (load_limit - at) / kRoundAdvanceBytes + 1;
      rounds = std::min({rounds, by_output, by_load});
    }
    if (rounds == 0) break;
    DecodeRounds(bmi2_, base, table, rounds, state);
  }
  for (size_t k = 0; k < kStreams; ++k) out[k] = state.out[k];

  // The rest one symbol at a time from absolute bit positions, each read
  // checked against the stream's end (which leaves it inside src, thanks to
  // the padding).
  for (size_t k = 0; k < kStreams; ++k) {
    uint64_t bit = state.bit[k];
    const uint64_t end_bit = uint64_t{stream_end[k]} * 8;
    while (out[k] < out_end[k]) {
      if (bit > end_bit) return Status::Corruption("huffman stream runs past its end");
      const uint64_t w = LoadLE64(base + (bit >> 3)) >> (bit & 7);
      const uint8_t symbol = static_cast<uint8_t>(table[w & (kTableSize - 1)] >> kEntrySymbolsShift);
      *out[k]++ = symbol;
      bit += lengths_[symbol];
    }
    if ((bit + 7) / 8 != stream_end[k])
      return Status::Corruption("huffman stream " + std::to_string(k) + " does not end where its size says");
    if ((bit & 7) && (base[bit >> 3] >> (bit & 7)) != 0)
      return Status::Corruption("huffman stream " + std::to_string(k) + " has non-zero padding bits");
  }
  return Status::Ok();
}

Status HuffmanDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  HuffmanDecoder decoder;
  return decoder.Decompress(src, dst);
}

}  // namespace vramflow
