// SPDX-License-Identifier: MIT
#include "codecs/chunk_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "codecs/bit_pack.h"
#include "codecs/bit_planes.h"
#include "codecs/chunk_analysis.h"
#include "codecs/sparse_words.h"
#include "common/endian.h"
#include "common/hash.h"

namespace vramflow {
namespace {

// A compressed block must save at least this fraction or it is stored raw:
// decoding raw is a copy, decoding anything else costs time.
constexpr double kMinSaving = 0.02;

bool WorthIt(size_t compressed, size_t raw) {
  return static_cast<double>(compressed) <= static_cast<double>(raw) * (1.0 - kMinSaving);
}

// Ends a planar payload of `pos` bytes in `dst` with the chunk's `tail`
// bytes (those no word holds) and takes it for `out` where it is worth it;
// otherwise `out` keeps the chunk raw.
void TakePlanar(TransformId transform, std::span<const uint8_t> raw, size_t tail, std::span<uint8_t> dst, size_t pos,
                EncodedChunk* out) {
  std::memcpy(dst.data() + pos, raw.data() + raw.size() - tail, tail);
  pos += tail;
  if (!WorthIt(pos, raw.size())) return;  // keep raw
  out->codec = CodecId::kPlanar;
  out->transform = transform;
  out->payload = dst.first(pos);
}

Result<int> ParseLevel(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty zstd level");
  std::string s(text);
  size_t used = 0;
  int level = 0;
  try {
    level = std::stoi(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size()) return Status::InvalidArgument("zstd level '" + s + "' is not an integer");
  if (level < MinZstdLevel() || level > MaxZstdLevel() || level == 0)
    return Status::InvalidArgument("zstd level " + s + " is outside " + std::to_string(MinZstdLevel()) + ".." +
                                   std::to_string(MaxZstdLevel()) + " (and not 0)");
  return level;
}

// "bitplanes2r1" .. "bitplanes4r7", "sparse2r0" .. "sparse4r7".
std::optional<TransformId> BitPlanesByName(std::string_view spec) {
  for (unsigned word : {2u, 4u})
    for (unsigned r = 0; r <= 7; ++r) {
      if (r > 0 && spec == TransformName(BitPlanesTransform(word, r))) return BitPlanesTransform(word, r);
      if (spec == TransformName(SparseTransform(word, r))) return SparseTransform(word, r);
    }
  return std::nullopt;
}

// Words compacted and grouped at a time by EncodeSparse.
constexpr size_t kSparseBlockWords = 4096;

// Whether bitpack stores `plane` about as small as Huffman would: its bits
// that vary across the plane are no more than the (sampled) entropy of its
// bytes plus kPackingSlackBits. Huffman cannot go below the entropy, and
// near-uniform varying bits (sign and low mantissa after a bit-plane
// rotation) leave it nothing to gain; bitpack then does the same at a
// fraction of the cost.
constexpr double kPackingSlackBits = 0.02;
// The bits that vary in a plane's first bytes vary in the whole plane: where
// these already rule bitpack out (a Huffman-coded exponent plane), the rest
// is not scanned. The answer is that of scanning it all.
constexpr size_t kPackingHeadBytes = 4096;

// Returns the plane's constant-bit mask when bitpack is as small.
std::optional<uint8_t> PackingIsAsSmall(std::span<const uint8_t> plane, double entropy) {
  auto fits = [&](uint8_t mask) {
    const int varying = 8 - std::popcount(mask);
    return varying < 8 && varying <= entropy + kPackingSlackBits;
  };
  if (plane.size() > kPackingHeadBytes && !fits(ConstantBits(plane.first(kPackingHeadBytes)))) return std::nullopt;
  const uint8_t mask = ConstantBits(plane);
  if (fits(mask)) return mask;
  return std::nullopt;
}

// One entry of a planar payload's plane table (docs/FORMAT.md 8.2).
void WritePlaneEntry(uint8_t* entry, CodecId codec, size_t stored) {
  entry[0] = static_cast<uint8_t>(codec);
  entry[1] = entry[2] = entry[3] = 0;
  StoreLE32(entry + 4, static_cast<uint32_t>(stored));
}

}  // namespace

Status ParseCodecSpec(std::string_view spec, EncoderOptions* options) {
  std::string_view name = spec.substr(0, spec.find(':'));
  std::string_view level = spec.size() > name.size() ? spec.substr(name.size() + 1) : std::string_view();
  if (name == "auto") options->codec = CodecChoice::kAuto;
  else if (name == "raw") options->codec = CodecChoice::kRaw;
  else if (name == "lz4") options->codec = CodecChoice::kLz4;
  else if (name == "zstd") options->codec = CodecChoice::kZstd;
  else if (name == "huffman") options->codec = CodecChoice::kHuffman;
  else
    return Status::InvalidArgument("unknown codec '" + std::string(spec) +
                                   "' (use auto, raw, lz4, zstd, zstd:LEVEL or huffman)");
  if (spec.size() > name.size()) {
    if (options->codec != CodecChoice::kZstd && options->codec != CodecChoice::kAuto)
      return Status::InvalidArgument("codec '" + std::string(name) + "' takes no level");
    VF_ASSIGN_OR_RETURN(options->zstd_level, ParseLevel(level));
  }
  return Status::Ok();
}

Status ParseTransformSpec(std::string_view spec, EncoderOptions* options) {
  if (spec == "auto") options->transform = TransformChoice::kAuto;
  else if (spec == "auto-fast") options->transform = TransformChoice::kAutoFast;
  else if (spec == "none") options->transform = TransformChoice::kNone;
  else if (spec == "bytegroup2" || spec == "bf16" || spec == "fp16") options->transform = TransformChoice::kByteGroup2;
  else if (spec == "bytegroup4" || spec == "fp32") options->transform = TransformChoice::kByteGroup4;
  else if (spec == "signplanes1" || spec == "fp8") options->transform = TransformChoice::kSignPlanes1;
  else if (auto t = BitPlanesByName(spec)) {
    options->transform = TransformChoice::kBitPlanes;
    options->bit_planes = *t;
  } else {
    return Status::InvalidArgument(
        "unknown transform '" + std::string(spec) +
        "' (use auto, auto-fast, none, bytegroup2, bytegroup4, signplanes1, bitplanes2rR or bitplanes4rR with R 1..7, "
        "sparse2rR or sparse4rR with R 0..7)");
  }
  return Status::Ok();
}

std::string DescribeOptions(const EncoderOptions& o) {
  std::string codec;
  switch (o.codec) {
    case CodecChoice::kAuto:
      codec = "auto (zstd " + std::to_string(o.zstd_level) + ")";
      break;
    case CodecChoice::kRaw:
      codec = "raw";
      break;
    case CodecChoice::kLz4:
      codec = "lz4";
      break;
    case CodecChoice::kZstd:
      codec = "zstd " + std::to_string(o.zstd_level);
      break;
    case CodecChoice::kHuffman:
      codec = "huffman";
      break;
  }
  std::string transform = "auto";
  if (o.transform == TransformChoice::kNone) transform = "none";
  if (o.transform == TransformChoice::kAutoFast) transform = "auto-fast";
  if (o.transform == TransformChoice::kByteGroup2) transform = "bytegroup2";
  if (o.transform == TransformChoice::kByteGroup4) transform = "bytegroup4";
  if (o.transform == TransformChoice::kBitPlanes) transform = TransformName(o.bit_planes);
  if (o.transform == TransformChoice::kSignPlanes1) transform = TransformName(TransformId::kSignPlanes1);
  return codec + ", transform " + transform;
}

size_t ChunkEncoder::MaxPayloadSize(size_t raw_size) {
  size_t whole = BlockCompressor::Bound(raw_size);
  size_t group2 = kPlaneEntryBytes * 2 + 2 * BlockCompressor::Bound(raw_size / 2) + 1;
  size_t group4 = kPlaneEntryBytes * 4 + 4 * BlockCompressor::Bound(raw_size / 4) + 3;
  size_t sign_planes =
      kPlaneEntryBytes * 2 + BlockCompressor::Bound(raw_size);  // signs packed within (EncodeSignPlanes)
  auto sparse = [&](size_t w) {                                 // the bitmap's entry and payload in front of the planes
    return kPlaneEntryBytes * (w + 1) + BlockCompressor::Bound(SparseMaskBytes(raw_size / w)) +
           w * BlockCompressor::Bound(raw_size / w) + w - 1;
  };
  return std::max({whole, group2, group4, sign_planes, sparse(2), sparse(4)});
}

Status ChunkEncoder::EncodeInto(std::span<const uint8_t> raw, std::span<uint8_t> payload_buffer, EncodedChunk* out,
                                std::optional<uint64_t> known_raw_hash) {
  if (payload_buffer.size() < MaxPayloadSize(raw.size()))
    return Status::Internal("EncodeInto: payload buffer smaller than MaxPayloadSize");
  external_ = payload_buffer;
  Status s = EncodeChunk(raw, known_raw_hash, out);
  external_ = {};
  return s;
}

std::span<uint8_t> ChunkEncoder::Output(size_t size) {
  if (!external_.empty()) return external_.first(size);
  if (output_.size() < size) output_.resize(size);
  return std::span<uint8_t>(output_.data(), size);
}

Status ChunkEncoder::Encode(std::span<const uint8_t> raw, EncodedChunk* out) {
  return EncodeChunk(raw, std::nullopt, out);
}

Status ChunkEncoder::EncodeChunk(std::span<const uint8_t> raw, std::optional<uint64_t> known_raw_hash,
                                 EncodedChunk* out) {
  *out = EncodedChunk{};
  if (options_.detect_zero_runs && !raw.empty() && IsAllZero(raw)) {
    out->zero_run = true;
    return Status::Ok();
  }
  out->raw_hash = known_raw_hash ? *known_raw_hash : Hash64(raw.data(), raw.size());
  out->payload = raw;  // stored raw unless something below does better
  if (options_.codec == CodecChoice::kRaw || raw.empty()) return Status::Ok();

  // Transform: forced, or chosen from a sample.
  TransformId transform = TransformId::kNone;
  ChunkAnalysis analysis;
  bool analysed = false;
  switch (options_.transform) {
    case TransformChoice::kNone:
      break;
    case TransformChoice::kByteGroup2:
      transform = TransformId::kByteGroup2;
      break;
    case TransformChoice::kByteGroup4:
      transform = TransformId::kByteGroup4;
      break;
    case TransformChoice::kBitPlanes:
      if (!IsKnownTransform(static_cast<uint8_t>(options_.bit_planes)) ||
          (RotationBits(options_.bit_planes) == 0 && !IsSparse(options_.bit_planes)))
        return Status::InvalidArgument("transform " + TransformName(options_.bit_planes) +
                                       " is not a bit-plane transform");
      transform = options_.bit_planes;
      break;
    case TransformChoice::kSignPlanes1:
      transform = TransformId::kSignPlanes1;
      break;
    case TransformChoice::kAuto:
    case TransformChoice::kAutoFast:
      analysis = AnalyzeChunk(
          raw, options_.transform == TransformChoice::kAutoFast ? PlanePolicy::kKeepSpeed : PlanePolicy::kSmallest);
      analysed = true;
      transform = analysis.best_transform;
      break;
  }
  unsigned word = WordSize(transform);
  if (raw.size() < word * 2) word = 1, transform = TransformId::kNone;

  if (options_.codec != CodecChoice::kAuto) {
    CodecId codec = options_.codec == CodecChoice::kLz4       ? CodecId::kLz4
                    : options_.codec == CodecChoice::kHuffman ? CodecId::kHuffman
                                                              : CodecId::kZstd;
    if (transform == TransformId::kSignPlanes1) return EncodeSignPlanes(codec, raw, out);
    if (word == 1) return EncodeWhole(codec, raw, out);
    CodecId plane_codecs[4] = {codec, codec, codec, codec};
    if (IsSparse(transform)) return EncodeSparse(transform, plane_codecs, raw, out);
    return EncodePlanar(transform, plane_codecs, raw, out);
  }

  // Auto: entropy decides raw versus compressed, for the chunk or for each
  // plane. Ungrouped chunks go to zstd, whose matches help generic data;
  // byte planes of words are close to i.i.d., so an order-0 coder gets their
  // entropy at a fraction of zstd's cost.
  if (!analysed) analysis = AnalyzeChunk(raw);
  if (transform == TransformId::kSignPlanes1) {
    if (analysis.entropy_all >= kIncompressibleBitsPerByte) return Status::Ok();
    return EncodeSignPlanes(CodecId::kHuffman, raw, out);
  }
  if (word == 1) {
    if (analysis.entropy_all >= kIncompressibleBitsPerByte) return Status::Ok();
    return EncodeWhole(CodecId::kZstd, raw, out);
  }
  CodecId plane_codecs[4];
  double plane_entropy[4];
  bool any_compressed = false;
  for (unsigned p = 0; p < word; ++p) {
    // The analysis's entropies are for its own choice; a forced transform
    // it did not choose has every plane tried (and kept raw if it does not pay).
    double h = 0;
    if (transform == analysis.best_transform) h = analysis.plane_entropy[p];
    else if (transform == TransformId::kByteGroup2) h = analysis.entropy_mod2[p];
    else if (transform == TransformId::kByteGroup4) h = analysis.entropy_mod4[p];
    plane_codecs[p] = h >= kIncompressibleBitsPerByte ? CodecId::kRaw : CodecId::kHuffman;
    plane_entropy[p] = h;
    any_compressed |= plane_codecs[p] != CodecId::kRaw;
  }
  // Leaving zero words out pays even where every plane is stored raw.
  if (IsSparse(transform)) return EncodeSparse(transform, plane_codecs, raw, out, plane_entropy);
  if (!any_compressed) return Status::Ok();
  return EncodePlanar(transform, plane_codecs, raw, out, plane_entropy);
}

Status ChunkEncoder::EncodeWhole(CodecId codec, std::span<const uint8_t> raw, EncodedChunk* out) {
  std::span<uint8_t> dst = Output(BlockCompressor::Bound(raw.size()));
  VF_ASSIGN_OR_RETURN(size_t n, compressor_.Compress(codec, options_.zstd_level, raw, dst));
  if (!WorthIt(n, raw.size())) return Status::Ok();  // keep raw
  out->codec = codec;
  out->payload = dst.first(n);
  return Status::Ok();
}

Status ChunkEncoder::EncodePlanar(TransformId transform, const CodecId* plane_codecs, std::span<const uint8_t> raw,
                                  EncodedChunk* out, const double* plane_entropy) {
  const unsigned word = WordSize(transform);
  const size_t plane_size = raw.size() / word;
  const size_t tail = raw.size() % word;
  const size_t table = kPlaneEntryBytes * word;
  std::span<uint8_t> dst = Output(table + word * BlockCompressor::Bound(plane_size) + tail);
  // Raw planes in front of the first coded plane have a known place in the
  // payload: they are grouped straight into it. The others go to scratch.
  if (planes_.size() < plane_size * word) planes_.resize(plane_size * word);
  uint8_t* plane_ptrs[4];
  unsigned placed = 0;  // planes 0 .. placed-1 are already in the payload
  while (placed < word && plane_codecs[placed] == CodecId::kRaw) {
    plane_ptrs[placed] = dst.data() + table + placed * plane_size;
    ++placed;
  }
  for (unsigned p = placed; p < word; ++p) plane_ptrs[p] = planes_.data() + p * plane_size;
  SplitPlanes(transform, raw.data(), raw.size(), plane_ptrs);

  VF_ASSIGN_OR_RETURN(size_t pos,
                      CodePlanes(plane_ptrs, word, plane_size, placed, plane_codecs, plane_entropy, dst, 0, table));
  TakePlanar(transform, raw, tail, dst, pos, out);
  return Status::Ok();
}

Result<size_t> ChunkEncoder::CodePlanes(uint8_t* const* plane_ptrs, unsigned count, size_t plane_size, unsigned placed,
                                        const CodecId* plane_codecs, const double* plane_entropy,
                                        std::span<uint8_t> dst, size_t entries_at, size_t pos) {
  for (unsigned p = 0; p < count; ++p) {
    std::span<const uint8_t> plane(plane_ptrs[p], plane_size);
    CodecId codec = plane_codecs[p];
    std::optional<uint8_t> pack_mask;
    if (plane_entropy && codec == CodecId::kHuffman) pack_mask = PackingIsAsSmall(plane, plane_entropy[p]);
    size_t stored = plane_size;
    if (pack_mask) {
      codec = CodecId::kBitPack;
      VF_ASSIGN_OR_RETURN(stored, BitPackCompress(plane, dst.subspan(pos), *pack_mask));
      if (!WorthIt(stored, plane_size)) codec = CodecId::kRaw;
    } else if (codec != CodecId::kRaw) {
      VF_ASSIGN_OR_RETURN(stored, compressor_.Compress(codec, options_.zstd_level, plane, dst.subspan(pos)));
      if (!WorthIt(stored, plane_size)) codec = CodecId::kRaw;
    }
    if (codec == CodecId::kRaw) {
      stored = plane_size;
      if (p >= placed) std::memcpy(dst.data() + pos, plane.data(), plane_size);
    }
    WritePlaneEntry(dst.data() + entries_at + p * kPlaneEntryBytes, codec, stored);
    pos += stored;
  }
  return pos;
}

Status ChunkEncoder::EncodeSparse(TransformId transform, const CodecId* plane_codecs, std::span<const uint8_t> raw,
                                  EncodedChunk* out, const double* plane_entropy) {
  const unsigned word = WordSize(transform);
  const size_t words = raw.size() / word, tail = raw.size() % word;
  const size_t mask_bytes = SparseMaskBytes(words);
  if (mask_.size() < mask_bytes) mask_.resize(mask_bytes);
  const size_t kept = BuildSparseMask(raw.data(), words, word, mask_.data());
  const std::span<const uint8_t> mask(mask_.data(), mask_bytes);
  const size_t table = kPlaneEntryBytes * (word + 1);
  std::span<uint8_t> dst =
      Output(table + BlockCompressor::Bound(mask_bytes) + word * BlockCompressor::Bound(kept) + tail);

  // The bitmap: runs of zero words are runs of 0x00 bytes among 0xff, which
  // zstd's matches take better than Huffman's one bit a byte; scattered zeros
  // the other way round. The smaller is kept (the bitmap is 1/32 or 1/16 of
  // the chunk), raw where neither pays.
  if (planes_.size() < std::max(kept * word, BlockCompressor::Bound(mask_bytes)))
    planes_.resize(std::max(kept * word, BlockCompressor::Bound(mask_bytes)));
  VF_ASSIGN_OR_RETURN(size_t mask_stored,
                      compressor_.Compress(CodecId::kHuffman, options_.zstd_level, mask, dst.subspan(table)));
  CodecId mask_codec = CodecId::kHuffman;
  VF_ASSIGN_OR_RETURN(size_t by_zstd, compressor_.Compress(CodecId::kZstd, options_.zstd_level, mask, planes_));
  if (by_zstd < mask_stored) {
    std::memcpy(dst.data() + table, planes_.data(), by_zstd);
    mask_codec = CodecId::kZstd, mask_stored = by_zstd;
  }
  if (!WorthIt(mask_stored, mask_bytes)) {
    std::memcpy(dst.data() + table, mask.data(), mask_bytes);
    mask_codec = CodecId::kRaw, mask_stored = mask_bytes;
  }
  WritePlaneEntry(dst.data(), mask_codec, mask_stored);

  // The non-zero words, compacted a block at a time and grouped into planes.
  if (block_.size() < kSparseBlockWords * word) block_.resize(kSparseBlockWords * word);
  uint8_t* plane_ptrs[4];
  for (unsigned p = 0; p < word; ++p) plane_ptrs[p] = planes_.data() + p * kept;
  const TransformId dense = DenseTransform(transform);
  size_t done = 0;  // words grouped
  for (size_t first = 0; first < words; first += kSparseBlockWords) {
    const size_t n =
        CompactWords(raw.data(), first, std::min(kSparseBlockWords, words - first), word, mask.data(), block_.data());
    uint8_t* at[4];
    for (unsigned p = 0; p < word; ++p) at[p] = plane_ptrs[p] + done;
    SplitPlanes(dense, block_.data(), n, at);
    done += n / word;
  }
  VF_ASSIGN_OR_RETURN(size_t pos, CodePlanes(plane_ptrs, word, kept, 0, plane_codecs, plane_entropy, dst,
                                             kPlaneEntryBytes, table + mask_stored));
  TakePlanar(transform, raw, tail, dst, pos, out);
  return Status::Ok();
}

Status ChunkEncoder::EncodeSignPlanes(CodecId codec, std::span<const uint8_t> raw, EncodedChunk* out) {
  const size_t n = raw.size();
  const size_t table = kPlaneEntryBytes * 2;
  // MaxPayloadSize leaves room for the coded plane at its worst; the signs
  // fit behind any coded plane that is worth keeping.
  std::span<uint8_t> dst = Output(MaxPayloadSize(n));
  if (planes_.size() < n) planes_.resize(n);
  uint8_t* plane_ptrs[2] = {planes_.data(), nullptr};  // the signs come from `raw`
  SplitPlanes(TransformId::kSignPlanes1, raw.data(), n, plane_ptrs);
  const std::span<const uint8_t> seven_bits(planes_.data(), n);
  VF_ASSIGN_OR_RETURN(size_t stored, compressor_.Compress(codec, options_.zstd_level, seven_bits, dst.subspan(table)));
  // Stored raw, the seven bits and the signs would be larger than the chunk.
  if (!WorthIt(stored, n)) return Status::Ok();  // keep raw
  const size_t signs_at = table + stored;
  if (dst.size() - signs_at < BitPackTopBitsBound(n)) return Status::Ok();  // keep raw
  const size_t signs = BitPackTopBits(raw, dst.subspan(signs_at));
  const CodecId codecs[2] = {codec, CodecId::kBitPack};
  const size_t sizes[2] = {stored, signs};
  for (unsigned p = 0; p < 2; ++p) WritePlaneEntry(dst.data() + p * kPlaneEntryBytes, codecs[p], sizes[p]);
  const size_t pos = signs_at + signs;
  if (!WorthIt(pos, n)) return Status::Ok();  // keep raw
  out->codec = CodecId::kPlanar;
  out->transform = TransformId::kSignPlanes1;
  out->payload = dst.first(pos);
  return Status::Ok();
}

Status ReadPlaneTable(TransformId transform, std::span<const uint8_t> payload, uint64_t raw_size,
                      std::vector<PlaneInfo>* planes) {
  if (!IsKnownTransform(static_cast<uint8_t>(transform)))
    return Status::Corruption("unknown transform id " + std::to_string(static_cast<int>(transform)));
  const unsigned word = WordSize(transform), count = PlaneCount(transform);
  if (count < 2) return Status::Corruption("planar payload without a planar transform");
  const size_t table = kPlaneEntryBytes * count;
  if (payload.size() < table)
    return Status::Corruption("planar payload of " + std::to_string(payload.size()) + " bytes is shorter than its " +
                              std::to_string(table) + "-byte plane table");
  const uint64_t plane_size = raw_size / word;
  uint64_t total = table + raw_size % word;
  planes->clear();
  for (unsigned p = 0; p < count; ++p) {
    const uint8_t* entry = payload.data() + p * kPlaneEntryBytes;
    if (!IsPlaneCodec(entry[0]))
      return Status::Corruption("plane " + std::to_string(p) + " has unknown codec id " + std::to_string(entry[0]));
    if (entry[1] || entry[2] || entry[3])
      return Status::Corruption("plane " + std::to_string(p) + " has non-zero reserved bytes");
    PlaneInfo info{static_cast<CodecId>(entry[0]), LoadLE32(entry + 4)};
    // Sparse words: plane 0 is the bitmap; the others' size is only known
    // once it is decoded (DecodeSparse checks their raw sizes).
    const bool sparse = IsSparse(transform);
    if (sparse && p == 0 && info.codec == CodecId::kRaw && info.stored_bytes != SparseMaskBytes(plane_size))
      return Status::Corruption("raw sparse-words bitmap stores " + std::to_string(info.stored_bytes) +
                                " bytes, expected " + std::to_string(SparseMaskBytes(plane_size)));
    if (!sparse && info.codec == CodecId::kRaw && info.stored_bytes != plane_size)
      return Status::Corruption("raw plane " + std::to_string(p) + " stores " + std::to_string(info.stored_bytes) +
                                " bytes, expected " + std::to_string(plane_size));
    total += info.stored_bytes;
    planes->push_back(info);
  }
  if (total != payload.size())
    return Status::Corruption("plane table accounts for " + std::to_string(total) + " bytes but the payload has " +
                              std::to_string(payload.size()));
  return Status::Ok();
}

Status ChunkDecoder::Decode(CodecId codec, TransformId transform, std::span<const uint8_t> payload,
                            std::span<uint8_t> dst) {
  if (!IsKnownTransform(static_cast<uint8_t>(transform)))
    return Status::Corruption("unknown transform id " + std::to_string(static_cast<int>(transform)));
  if (!IsKnownCodec(static_cast<uint8_t>(codec)))
    return Status::Corruption("unknown codec id " + std::to_string(static_cast<int>(codec)));
  if (transform == TransformId::kNone) {
    if (codec == CodecId::kPlanar) return Status::Corruption("planar codec without a planar transform");
    return decompressor_.Decompress(codec, payload, dst);
  }
  if (codec != CodecId::kPlanar)
    return Status::Corruption("transform " + TransformName(transform) + " requires the planar codec, found " +
                              CodecName(codec));
  std::vector<PlaneInfo> planes;
  VF_RETURN_IF_ERROR(ReadPlaneTable(transform, payload, dst.size(), &planes));
  if (IsSparse(transform)) return DecodeSparse(transform, planes, payload, dst);
  const unsigned word = WordSize(transform), count = PlaneCount(transform);
  const size_t plane_size = dst.size() / word;
  // Sign planes decode their seven-bit plane into dst, where JoinPlanes
  // reads it in place: the scratch holds no more than the chunk either way.
  const bool sign_planes = transform == TransformId::kSignPlanes1;
  const size_t scratch = sign_planes ? plane_size : plane_size * word;
  if (planes_.size() < scratch) planes_.resize(scratch);
  const uint8_t* plane_ptrs[4];
  size_t pos = kPlaneEntryBytes * count;
  for (unsigned p = 0; p < count; ++p) {
    std::span<const uint8_t> src = payload.subspan(pos, planes[p].stored_bytes);
    if (planes[p].codec == CodecId::kRaw) {
      plane_ptrs[p] = src.data();  // decode straight from the payload
    } else {
      uint8_t* target = sign_planes ? (p == 0 ? dst.data() : planes_.data()) : planes_.data() + p * plane_size;
      std::span<uint8_t> plane(target, plane_size);
      Status s = decompressor_.Decompress(planes[p].codec, src, plane);
      if (!s.ok()) return s.WithContext("plane " + std::to_string(p));
      plane_ptrs[p] = plane.data();
    }
    pos += planes[p].stored_bytes;
  }
  JoinPlanes(transform, plane_ptrs, dst.size(), dst.data());
  if (dst.size() % word) std::memcpy(dst.data() + plane_size * word, payload.data() + pos, dst.size() % word);
  return Status::Ok();
}

}  // namespace vramflow

namespace vramflow {

Status ChunkDecoder::DecodeSparse(TransformId transform, const std::vector<PlaneInfo>& planes,
                                  std::span<const uint8_t> payload, std::span<uint8_t> dst) {
  const unsigned word = WordSize(transform);
  const size_t words = dst.size() / word, mask_bytes = SparseMaskBytes(words);
  // Scratch: the bitmap, then the planes of the non-zero words (at most all).
  if (planes_.size() < mask_bytes + words * word) planes_.resize(mask_bytes + words * word);
  size_t pos = kPlaneEntryBytes * (word + 1);
  const uint8_t* mask = payload.data() + pos;  // a raw bitmap is read in place
  if (planes[0].codec != CodecId::kRaw) {
    Status s = decompressor_.Decompress(planes[0].codec, payload.subspan(pos, planes[0].stored_bytes),
                                        std::span<uint8_t>(planes_.data(), mask_bytes));
    if (!s.ok()) return s.WithContext("sparse-words bitmap");
    mask = planes_.data();
  }
  pos += planes[0].stored_bytes;
  VF_ASSIGN_OR_RETURN(const size_t kept, CountSparseMask(mask, words));
  const uint8_t* plane_ptrs[4];
  for (unsigned p = 0; p < word; ++p) {
    const PlaneInfo& info = planes[p + 1];
    std::span<const uint8_t> src = payload.subspan(pos, info.stored_bytes);
    if (info.codec == CodecId::kRaw) {
      if (info.stored_bytes != kept)
        return Status::Corruption("raw plane " + std::to_string(p + 1) + " stores " +
                                  std::to_string(info.stored_bytes) + " bytes, expected " + std::to_string(kept) +
                                  " (the non-zero words)");
      plane_ptrs[p] = src.data();
    } else {
      std::span<uint8_t> plane(planes_.data() + mask_bytes + p * kept, kept);
      Status s = decompressor_.Decompress(info.codec, src, plane);
      if (!s.ok()) return s.WithContext("plane " + std::to_string(p + 1));
      plane_ptrs[p] = plane.data();
    }
    pos += info.stored_bytes;
  }
  // The non-zero words at the end of the chunk, then each moved to its place.
  JoinPlanes(DenseTransform(transform), plane_ptrs, kept * word, dst.data() + (words - kept) * word);
  ExpandWords(mask, words, kept, word, dst.data());
  if (dst.size() % word) std::memcpy(dst.data() + words * word, payload.data() + pos, dst.size() % word);
  return Status::Ok();
}

}  // namespace vramflow
