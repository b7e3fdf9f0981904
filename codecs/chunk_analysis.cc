// SPDX-License-Identifier: MIT
#include "codecs/chunk_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codecs/bit_planes.h"
#include "codecs/huffman.h"
#include "common/endian.h"

namespace vramflow {

bool IsAllZero(std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  // 256-byte blocks of 64-bit words OR-ed together: early exit on non-zero
  // data, memory-bound on zeros.
  while (n >= 256) {
    uint64_t acc = 0;
    for (size_t i = 0; i < 256; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      acc |= w;
    }
    if (acc) return false;
    p += 256;
    n -= 256;
  }
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

double HistogramEntropy(const uint32_t* histogram, uint64_t total) {
  if (total == 0) return 0.0;
  double bits = 0.0;
  const double inv = 1.0 / static_cast<double>(total);
  for (int i = 0; i < 256; ++i) {
    if (!histogram[i]) continue;
    double p = histogram[i] * inv;
    bits -= p * std::log2(p);
  }
  return bits;
}

namespace {

// Bits an entropy coder spends per byte of a plane with entropy h: a plane
// near 8 bits is stored raw, a compressible one pays a small overhead.
double PlaneCost(double h) { return h >= kIncompressibleBitsPerByte ? 8.0 : std::min(8.0, h * 1.03 + 0.05); }

double Entropy64(const std::array<uint64_t, 256>& histogram) {
  uint64_t total = 0;
  for (uint64_t c : histogram) total += c;
  if (total == 0) return 0.0;
  double bits = 0.0;
  const double inv = 1.0 / static_cast<double>(total);
  for (uint64_t c : histogram) {
    if (!c) continue;
    double p = static_cast<double>(c) * inv;
    bits -= p * std::log2(p);
  }
  return bits;
}

// LooksLikeFp8 allows at most 1/10 of the sampled bytes to be unpaired:
// sampling alone leaves about 3% (64 KiB of normally distributed e4m3).
constexpr uint64_t kFp8AsymmetryDenominator = 10;

// 16-bit halves (the part of a float word that holds sign and exponent)
// counted by their top 12 bits: enough to place every bit that a rotation
// of up to 4 moves between the two bytes. The low 4 bits are mantissa bits,
// taken as uniform. A sample holds at most kAnalysisSampleBytes / 4 words,
// so 16-bit counters hold the counts of both halves together: two tables
// take 16 KiB of the first-level cache instead of 32. (With 32-bit counters
// and a load per byte, the analysis of a 1 MiB float chunk took 1.1x as
// long.)
using HalfHistogram = std::array<uint16_t, 4096>;
static_assert(2 * (kAnalysisSampleBytes / 4) <= UINT16_MAX);
constexpr unsigned kUncountedBits = 4;

struct PlanePair {
  double entropy[2];                    // low byte, high byte of the rotated half
  double bits;                          // estimated coded bits for both bytes
  unsigned coded;                       // how many of the two are entropy coded (not raw)
  std::array<uint64_t, 256> counts[2];  // low byte, high byte
};

// The halves a sample holds, listed once for every rotation: samples of
// float words hold a few hundred of the 4096.
struct SeenHalves {
  std::array<uint16_t, 4096> value;  // k of halves[k], in increasing order
  std::array<uint32_t, 4096> count;
  size_t size = 0;
};

void ListSeenHalves(const HalfHistogram& halves, SeenHalves* seen) {
  seen->size = 0;
  for (uint32_t k = 0; k < halves.size(); ++k) {
    if (!halves[k]) continue;
    seen->value[seen->size] = static_cast<uint16_t>(k);
    seen->count[seen->size++] = halves[k];
  }
}

// Histograms and entropies of the two byte planes of the halves in `seen`
// rotated left by r (0 = byte grouping). PricePlanes adds the estimate.
void RotatedPlanes(const SeenHalves& seen, unsigned r, PlanePair* pair) {
  auto& low = pair->counts[0];
  auto& high = pair->counts[1];
  low.fill(0);
  high.fill(0);
  for (size_t i = 0; i < seen.size; ++i) {
    uint16_t v = RotateLeft16(static_cast<uint16_t>(seen.value[i] << kUncountedBits), r);
    high[v >> 8] += seen.count[i];
    low[v & 0xff] += seen.count[i];
  }
  pair->entropy[0] = std::min(8.0, Entropy64(low) + kUncountedBits);
  pair->entropy[1] = Entropy64(high);
}

// The estimated size of both planes: a plane stored raw when its entropy
// reaches kIncompressibleBitsPerByte, coded with Huffman otherwise. Never
// below entropy[0] + entropy[1] (no code is shorter than the entropy).
void PricePlanes(PlanePair* pair) {
  double low_bits =
      pair->entropy[0] >= kIncompressibleBitsPerByte ? 8.0 : HuffmanBitsPerSymbol(pair->counts[0]) + kUncountedBits;
  double high_bits = pair->entropy[1] >= kIncompressibleBitsPerByte ? 8.0 : HuffmanBitsPerSymbol(pair->counts[1]);
  pair->bits = std::min(8.0, low_bits) + std::min(8.0, high_bits);
  pair->coded = (low_bits < 8.0) + (high_bits < 8.0);
}

// Whether bytes with this histogram look like 1-byte floats of both signs:
// compressible, and every value about as frequent as the value with the
// other top bit (weights, gradients and activations are symmetric about
// zero). Text, code and integers (two's complement puts -x far from x) are
// not; zstd, whose matches may help them, keeps those.
bool LooksLikeFp8(const uint32_t (&all)[256]) {
  uint64_t total = 0, asymmetry = 0;
  for (int v = 0; v < 128; ++v) {
    total += uint64_t{all[v]} + all[v + 128];
    asymmetry += all[v] > all[v + 128] ? all[v] - all[v + 128] : all[v + 128] - all[v];
  }
  return total > 0 && HistogramEntropy(all, total) < kIncompressibleBitsPerByte &&
         asymmetry * kFp8AsymmetryDenominator <= total;
}

// Sparse words are considered where at least 1/64 of the sampled words are
// zero, and taken where they save 0.5% of the estimate. Their bitmap is
// priced at kSparseBitmapFloorBits per word plus kSparseBitsPerSwitch per
// change between zero and non-zero words (a run's boundary costs zstd a
// match and a literal or two), at most the bit a word it takes raw.
constexpr uint64_t kSparseMinZerosDenominator = 64;
constexpr double kSparseMinSaving = 0.005;
constexpr double kSparseBitmapFloorBits = 0.02;
constexpr double kSparseBitsPerSwitch = 16;

// What the analysis counts in its sample: bytes 0 and 2 of each 4-byte
// group (and every byte of a partial group) in `hist`, the 16-bit halves in
// `halves` (bytes 1 and 3 are their top 8 bits), and the words that are zero.
struct SampleCounts {
  uint32_t hist[4][256];
  uint64_t counts[4] = {0, 0, 0, 0};
  // halves[0]: bytes 0-1 of each 4-byte group, halves[1]: bytes 2-3.
  std::array<HalfHistogram, 2> halves{};
  // Zero 4-byte words, zero low and high halves, and how often the sequence
  // of zero and non-zero changes (4-byte words; halves in order).
  uint64_t zero4 = 0, zero_low = 0, zero_high = 0, switches4 = 0, switches2 = 0;
};

// Order-0 entropies of the byte positions (hist[1] and hist[3] from the halves).
void SampleEntropies(SampleCounts c, ChunkAnalysis* a) {
  constexpr uint32_t kHalvesPerHighByte = 1u << (8 - kUncountedBits);
  for (uint32_t k = 0; k < c.halves[0].size(); ++k) {
    c.hist[1][k / kHalvesPerHighByte] += c.halves[0][k];
    c.hist[3][k / kHalvesPerHighByte] += c.halves[1][k];
  }
  uint32_t mod2[2][256];
  uint32_t all[256];
  for (int v = 0; v < 256; ++v) {
    mod2[0][v] = c.hist[0][v] + c.hist[2][v];
    mod2[1][v] = c.hist[1][v] + c.hist[3][v];
    all[v] = mod2[0][v] + mod2[1][v];
  }
  for (int p = 0; p < 4; ++p) a->entropy_mod4[p] = HistogramEntropy(c.hist[p], c.counts[p]);
  a->entropy_mod2[0] = HistogramEntropy(mod2[0], c.counts[0] + c.counts[2]);
  a->entropy_mod2[1] = HistogramEntropy(mod2[1], c.counts[1] + c.counts[3]);
  a->entropy_all = HistogramEntropy(all, c.counts[0] + c.counts[1] + c.counts[2] + c.counts[3]);
  a->fp8_like = LooksLikeFp8(all);
  a->bits_word1 = PlaneCost(a->entropy_all);
  a->bits_word2 = (PlaneCost(a->entropy_mod2[0]) + PlaneCost(a->entropy_mod2[1])) / 2;
  a->bits_word4 = 0;
  for (double h : a->entropy_mod4) a->bits_word4 += PlaneCost(h) / 4;
}

// Byte grouping or bit planes for a->best_word (2 or 4): the transform, its
// planes' entropies and the estimated bits per input byte.
void PickPlanes(const std::array<HalfHistogram, 2>& halves, PlanePolicy policy, ChunkAnalysis* a) {
  // The same estimate for every rotation. For 2-byte words both halves are
  // words; for 4-byte words the upper half is rotated and the two low bytes
  // are grouped as they are.
  HalfHistogram words = halves[1];
  if (a->best_word == 2)
    for (size_t k = 0; k < words.size(); ++k) words[k] = static_cast<uint16_t>(words[k] + halves[0][k]);
  double fixed_bits = 0;  // the low bytes of 4-byte words, the same for every rotation
  if (a->best_word == 4) fixed_bits = PlaneCost(a->entropy_mod4[0]) + PlaneCost(a->entropy_mod4[1]);
  // Byte grouping entropy-codes the upper half's planes below the threshold;
  // kKeepSpeed allows no layout that codes more of them.
  const double* upper = a->best_word == 2 ? a->entropy_mod2.data() : a->entropy_mod4.data() + 2;
  const unsigned grouping_coded = (upper[0] < kIncompressibleBitsPerByte) + (upper[1] < kIncompressibleBitsPerByte);
  // Every rotation's entropies first; then Huffman prices (a code built per
  // plane, the costly part) in order of those lower bounds, until the bound
  // alone rules the rest out. The choice is that of pricing them all: the
  // smallest estimate, the smaller rotation on a tie, r = 0 always allowed.
  std::array<PlanePair, kMaxAnalysedRotation + 1> pairs;
  std::array<unsigned, kMaxAnalysedRotation + 1> order;
  SeenHalves seen;
  ListSeenHalves(words, &seen);
  for (unsigned r = 0; r <= kMaxAnalysedRotation; ++r) {
    RotatedPlanes(seen, r, &pairs[r]);
    order[r] = r;
  }
  auto bound = [&](unsigned r) { return pairs[r].entropy[0] + pairs[r].entropy[1]; };
  std::stable_sort(order.begin(), order.end(), [&](unsigned x, unsigned y) { return bound(x) < bound(y); });
  constexpr double kRounding = 1e-9;  // entropies and prices are sums of doubles
  int best_rotation = -1;
  for (unsigned r : order) {
    if (best_rotation >= 0 && bound(r) > pairs[best_rotation].bits + kRounding) break;  // nor any after it
    PricePlanes(&pairs[r]);
    if (r > 0 && policy == PlanePolicy::kKeepSpeed && pairs[r].coded > grouping_coded) continue;
    if (best_rotation < 0 || pairs[r].bits < pairs[best_rotation].bits ||
        (pairs[r].bits == pairs[best_rotation].bits && r < static_cast<unsigned>(best_rotation)))
      best_rotation = static_cast<int>(r);
  }
  // r = 0 is never ruled out by the policy, and the loop stops early only
  // once it has a choice: best_rotation is set.
  const PlanePair& best_pair = pairs[best_rotation];
  a->best_transform =
      best_rotation == 0 ? static_cast<TransformId>(a->best_word) : BitPlanesTransform(a->best_word, best_rotation);
  if (best_rotation == 0) {  // the exact entropies of the byte planes
    if (a->best_word == 2) a->plane_entropy = {a->entropy_mod2[0], a->entropy_mod2[1], 0, 0};
    else a->plane_entropy = a->entropy_mod4;
    a->bits_best = a->best_word == 2 ? a->bits_word2 : a->bits_word4;
  } else if (a->best_word == 2) {
    a->plane_entropy = {best_pair.entropy[0], best_pair.entropy[1], 0, 0};
    a->bits_best = best_pair.bits / 2;
  } else {
    a->plane_entropy = {a->entropy_mod4[0], a->entropy_mod4[1], best_pair.entropy[0], best_pair.entropy[1]};
    a->bits_best = (fixed_bits + best_pair.bits) / 4;
  }
}

// Sparse words (sparse_words.h) where the sample's zero words make them
// smaller than a->best_transform: the same choice of rotation, made on the
// non-zero words alone, plus the bitmap.
void ConsiderSparse(const SampleCounts& c, PlanePolicy policy, ChunkAnalysis* a) {
  const unsigned w = a->best_word;
  const uint64_t words = w == 4 ? c.counts[0] : c.counts[0] + c.counts[2];  // whole words sampled
  const uint64_t zeros = w == 4 ? c.zero4 : c.zero_low + c.zero_high;
  if (words == 0 || zeros * kSparseMinZerosDenominator < words) return;
  SampleCounts nonzero = c;
  auto remove = [&](uint64_t n, int low_byte, int half) {  // n zero words (w = 4) or halves (w = 2)
    nonzero.hist[low_byte][0] -= static_cast<uint32_t>(n);
    nonzero.counts[low_byte] -= n;
    nonzero.counts[low_byte + 1] -= n;
    nonzero.halves[half][0] = static_cast<uint16_t>(nonzero.halves[half][0] - n);
  };
  if (w == 4) {
    remove(c.zero4, 0, 0);
    remove(c.zero4, 2, 1);
  } else {
    remove(c.zero_low, 0, 0);
    remove(c.zero_high, 2, 1);
  }
  ChunkAnalysis b;
  SampleEntropies(nonzero, &b);
  b.best_word = w;
  PickPlanes(nonzero.halves, policy, &b);
  // The bitmap: a bit a word stored raw; runs of zero words (what sparse
  // data holds) make it far smaller, which its codecs find.
  const double switches = static_cast<double>(w == 4 ? c.switches4 : c.switches2);
  const double bitmap_bits = std::min(1.0, kSparseBitmapFloorBits + kSparseBitsPerSwitch * switches / words);
  const double kept = 1.0 - static_cast<double>(zeros) / words;
  const double bits = kept * b.bits_best + bitmap_bits / w;
  if (bits >= a->bits_best * (1.0 - kSparseMinSaving)) return;
  a->best_transform = SparseTransform(w, RotationBits(b.best_transform));
  a->plane_entropy = b.plane_entropy;
  a->bits_best = bits;
}

}  // namespace

ChunkAnalysis AnalyzeChunk(std::span<const uint8_t> data, PlanePolicy policy) {
  ChunkAnalysis a;
  if (data.empty()) return a;
  SampleCounts c;
  std::memset(c.hist, 0, sizeof(c.hist));
  bool zero4 = false, zero2 = false;  // the last word, the last half

  // Sample 16 evenly spaced, 64-byte aligned segments (or everything).
  constexpr size_t kSegments = 16;
  constexpr size_t kSegmentBytes = kAnalysisSampleBytes / kSegments;
  // `begin` is a multiple of 4, so position i & 3 is the byte's place in its word.
  // Bytes 1 and 3 of whole words are counted only in the halves, whose top
  // 8 bits they are: added to hist[1] and hist[3] by SampleEntropies.
  auto add = [&](size_t begin, size_t end) {
    const uint8_t* d = data.data();
    size_t i = begin;
    // Two words per load, taken apart by shifts.
    auto count_word = [&](uint32_t word) {
      ++c.hist[0][word & 0xff];
      ++c.hist[2][(word >> 16) & 0xff];
      ++c.halves[0][(word & 0xffff) >> kUncountedBits];
      ++c.halves[1][word >> (16 + kUncountedBits)];
    };
    for (; i + 8 <= end; i += 8) {
      const uint64_t words = LoadLE64(d + i);
      count_word(static_cast<uint32_t>(words));
      count_word(static_cast<uint32_t>(words >> 32));
    }
    for (; i + 4 <= end; i += 4) count_word(LoadLE32(d + i));
    for (size_t p = 0; p < 4; ++p) c.counts[p] += (i - begin) / 4;
    for (; i < end; ++i) {
      ++c.hist[i & 3][d[i]];
      ++c.counts[i & 3];
    }
  };
  // Zero words and halves, and how often zero and non-zero alternate: a
  // second pass over the sample, made only where a 1/64 of the halves have
  // their top 12 bits zero (zero halves among them), so that chunks without
  // zero words pay nothing for it.
  auto add_zeros = [&](size_t begin, size_t end) {
    for (size_t i = begin; i + 4 <= end; i += 4) {
      const uint32_t word = LoadLE32(data.data() + i);
      const bool z4 = word == 0, low = (word & 0xffff) == 0, high = (word >> 16) == 0;
      c.zero4 += z4;
      c.zero_low += low;
      c.zero_high += high;
      c.switches4 += z4 != zero4;
      c.switches2 += (low != zero2) + (high != low);
      zero4 = z4, zero2 = high;
    }
  };
  auto sample = [&](auto&& count) {
    if (data.size() <= kAnalysisSampleBytes) return count(0, data.size());
    size_t stride = data.size() / kSegments;
    for (size_t s = 0; s < kSegments; ++s) {
      size_t begin = (s * stride) & ~size_t{63};
      count(begin, std::min(data.size(), begin + kSegmentBytes));
    }
  };
  sample(add);
  const uint64_t near_zero = uint64_t{c.halves[0][0]} + c.halves[1][0];
  if (near_zero * kSparseMinZerosDenominator >= 2 * c.counts[0]) sample(add_zeros);
  SampleEntropies(c, &a);

  // Grouping costs a pass over the data; take it only for a clear gain.
  a.best_word = 1;
  double best = a.bits_word1;
  if (a.bits_word2 < best * 0.97) {
    best = a.bits_word2;
    a.best_word = 2;
  }
  if (a.bits_word4 < best * 0.97) {
    best = a.bits_word4;
    a.best_word = 4;
  }
  if (a.best_word == 1) {
    if (a.fp8_like) a.best_transform = TransformId::kSignPlanes1;
    return a;
  }
  PickPlanes(c.halves, policy, &a);
  ConsiderSparse(c, policy, &a);
  return a;
}

}  // namespace vramflow
