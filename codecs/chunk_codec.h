// SPDX-License-Identifier: MIT
// ChunkEncoder / ChunkDecoder: the per-chunk codec policy.
//
// The encoder turns one chunk of raw bytes into what a data frame carries:
// a codec id, a transform id and a payload, or "this chunk is all zeros".
// In auto mode it decides per chunk, from a cheap sample: zero run, stored
// raw (incompressible), plain zstd, or byte-grouped planes with a codec per
// plane. The decoder reverses any payload bit-exactly and rejects malformed
// ones with a specific error.
//
// Both keep scratch buffers and codec contexts between calls: use one per
// thread. Neither is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/block_codec.h"
#include "codecs/codec_ids.h"
#include "common/status.h"

namespace vramflow {

enum class CodecChoice { kAuto, kRaw, kLz4, kZstd, kHuffman };
// kAuto: byte grouping or bit planes per chunk, whichever is estimated
// smallest; kAutoFast: the same among layouts that entropy-code no more
// planes than byte grouping (PlanePolicy); kBitPlanes: the transform in
// EncoderOptions::bit_planes; kSignPlanes1: fp8's sign planes on every chunk.
enum class TransformChoice { kAuto, kNone, kByteGroup2, kByteGroup4, kBitPlanes, kAutoFast, kSignPlanes1 };

struct EncoderOptions {
  CodecChoice codec = CodecChoice::kAuto;
  int zstd_level = 1;  // zstd level for kZstd and for planes auto sends to zstd
  // kAuto detects the word size per chunk; the CLI defaults to kNone when a
  // fixed codec is asked for, so "zstd" means plain zstd.
  TransformChoice transform = TransformChoice::kAuto;
  bool detect_zero_runs = true;
  TransformId bit_planes = TransformId::kNone;  // with kBitPlanes, e.g. BitPlanesTransform(2, 1)
};

// Parses "auto", "raw", "lz4", "zstd", "zstd:LEVEL", "huffman" or
// "auto:LEVEL" (the zstd level auto uses for chunks it does not byte-group).
// Levels may be negative ("zstd:-5").
Status ParseCodecSpec(std::string_view spec, EncoderOptions* options);
// Parses "auto", "auto-fast", "none", "bytegroup2" (alias "bf16"/"fp16"), "bytegroup4" (alias "fp32"),
// "signplanes1" (alias "fp8") or a bit-plane transform "bitplanes2rR" / "bitplanes4rR" (R = 1..7).
Status ParseTransformSpec(std::string_view spec, EncoderOptions* options);
std::string DescribeOptions(const EncoderOptions& options);

// Size of one entry of the plane table that starts a planar payload.
inline constexpr size_t kPlaneEntryBytes = 8;

struct PlaneInfo {
  CodecId codec = CodecId::kRaw;
  uint32_t stored_bytes = 0;
};

struct EncodedChunk {
  bool zero_run = false;
  CodecId codec = CodecId::kRaw;
  TransformId transform = TransformId::kNone;
  uint64_t raw_hash = 0;  // XXH3-64 of the raw bytes; 0 for zero runs
  // The frame payload. Points into the encoder's buffer or into the input;
  // valid until the next Encode() or until the input changes.
  std::span<const uint8_t> payload;
};

class ChunkEncoder {
 public:
  explicit ChunkEncoder(EncoderOptions options) : options_(options) {}
  Status Encode(std::span<const uint8_t> raw, EncodedChunk* out);
  // Like Encode, but an encoded payload is written into `payload_buffer`,
  // which must hold MaxPayloadSize(raw.size()) bytes (a raw payload still
  // points at `raw`). The encoder then keeps only MemoryBytes() of its own.
  // `known_raw_hash`, when given, is the caller's Hash64 of `raw` (the dump
  // graph has it from HashChunk), and saves the encoder a pass over the chunk.
  Status EncodeInto(std::span<const uint8_t> raw, std::span<uint8_t> payload_buffer, EncodedChunk* out,
                    std::optional<uint64_t> known_raw_hash = std::nullopt);
  const EncoderOptions& options() const { return options_; }

  static size_t MaxPayloadSize(size_t raw_size);
  // Memory an encoder keeps for chunks of `raw_size` with EncodeInto:
  // grouping scratch plus codec state.
  static size_t MemoryBytes(const EncoderOptions& options, size_t raw_size) {
    return raw_size + raw_size / 16 + 4 * 4096 + CompressorStateBytes(options.zstd_level, raw_size);
  }

 private:
  Status EncodeChunk(std::span<const uint8_t> raw, std::optional<uint64_t> known_raw_hash, EncodedChunk* out);
  Status EncodeWhole(CodecId codec, std::span<const uint8_t> raw, EncodedChunk* out);
  // `plane_entropy`, when given (auto), lets a Huffman plane whose varying
  // bits are about as many as its entropy go to bitpack instead.
  Status EncodePlanar(TransformId transform, const CodecId* plane_codecs, std::span<const uint8_t> raw,
                      EncodedChunk* out, const double* plane_entropy = nullptr);
  // Sign planes (fp8): the seven-bit plane coded with `codec`, the signs
  // bit-packed after it (always: one bit per byte is what they hold).
  Status EncodeSignPlanes(CodecId codec, std::span<const uint8_t> raw, EncodedChunk* out);
  // Sparse words (docs/FORMAT.md 8.6): the bitmap of non-zero words, then
  // their planes coded as EncodePlanar codes a chunk's.
  Status EncodeSparse(TransformId transform, const CodecId* plane_codecs, std::span<const uint8_t> raw,
                      EncodedChunk* out, const double* plane_entropy = nullptr);
  // Codes `count` planes of `plane_size` bytes into dst from `pos` on, each
  // entry of the plane table at dst[entries_at + 8 p]; planes before
  // `placed` are already in place. Returns where the last one ends.
  Result<size_t> CodePlanes(uint8_t* const* plane_ptrs, unsigned count, size_t plane_size, unsigned placed,
                            const CodecId* plane_codecs, const double* plane_entropy, std::span<uint8_t> dst,
                            size_t entries_at, size_t pos);
  std::span<uint8_t> Output(size_t size);

  EncoderOptions options_;
  BlockCompressor compressor_;
  std::vector<uint8_t> planes_;  // grouped bytes
  std::vector<uint8_t> mask_;    // EncodeSparse's bitmap
  std::vector<uint8_t> block_;   // EncodeSparse's compacted words
  std::vector<uint8_t> output_;  // encoded payload, unless external_ is set
  std::span<uint8_t> external_;  // EncodeInto's buffer
};

class ChunkDecoder {
 public:
  // Memory a decoder keeps for chunks of `raw_size`.
  // (Sparse words add their bitmap, raw_size / 16 at most.)
  static size_t MemoryBytes(size_t raw_size) { return raw_size + raw_size / 16 + DecompressorStateBytes(); }
  // Decodes `payload` into exactly dst.size() bytes.
  Status Decode(CodecId codec, TransformId transform, std::span<const uint8_t> payload, std::span<uint8_t> dst);

 private:
  Status DecodeSparse(TransformId transform, const std::vector<PlaneInfo>& planes, std::span<const uint8_t> payload,
                      std::span<uint8_t> dst);

  BlockDecompressor decompressor_;
  std::vector<uint8_t> planes_;
};

// Reads the plane table of a planar payload (for inspection); fails on a
// malformed table exactly as Decode() would.
Status ReadPlaneTable(TransformId transform, std::span<const uint8_t> payload, uint64_t raw_size,
                      std::vector<PlaneInfo>* planes);

}  // namespace vramflow
