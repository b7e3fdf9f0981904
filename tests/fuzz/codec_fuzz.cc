// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted bytes straight into the plane codecs' decoders
// (huffman, bitpack) and the sparse-words transforms' chunk decoder, without
// the stream reader's checksums in front.
//
// Input: [u8 selector][u24 decoded size, little-endian][payload]. With the
// selector's bit 1 set, the payload is a planar chunk of the sparse-words
// transform its bits 2 (word 4, else 2) and 3-5 (rotation) name, decoded by
// a ChunkDecoder kept from input to input; what it accepts must survive a
// sparse-words encode and decode. Otherwise the
// payload is decoded by the codec the selector's low bit names (a Huffman
// decoder kept from input to input, as BlockDecompressor keeps one, so its
// cached table is exercised too) into exactly that many bytes (at most
// 1 MiB). A decoder must either reject the payload or fill the output; what
// it accepts must survive an encode and decode round trip. The whole input
// also goes through both encoders and back. Where the CPU has BMI2, the
// codecs' kernels built for it (which the others use) and the baseline
// kernels must agree: the same payloads, the same verdicts and bytes.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR in the environment the binary writes
// seed inputs (valid payloads of skewed bytes and of float planes) into DIR
// and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codecs/bit_pack.h"
#include "codecs/chunk_codec.h"
#include "codecs/huffman.h"
#include "codecs/sparse_words.h"

namespace vramflow {
namespace {

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "codec_fuzz: broken promise: %s\n", what);
  std::abort();
}

constexpr size_t kMaxDecodedBytes = 1 << 20;

std::vector<uint8_t> Compress(bool huffman, std::span<const uint8_t> src) {
  std::vector<uint8_t> out(huffman ? HuffmanBound(src.size()) : BitPackBound(src.size()));
  Result<size_t> n = huffman ? HuffmanCompress(src, out) : BitPackCompress(src, out);
  if (!n.ok()) Broken("an encoder failed");
  out.resize(*n);
  return out;
}

void ExpectRoundTrip(bool huffman, std::span<const uint8_t> src, HuffmanDecoder& decoder) {
  const std::vector<uint8_t> payload = Compress(huffman, src);
  std::vector<uint8_t> back(src.size());
  Status s = huffman ? decoder.Decompress(payload, back) : BitPackDecompress(payload, back);
  if (!s.ok()) Broken("a payload the encoder wrote does not decode");
  if (!std::equal(back.begin(), back.end(), src.begin())) Broken("a round trip changed the bytes");
}

// The baseline kernels give what the automatically chosen ones gave.
void ExpectBaselineAgrees(bool huffman, std::span<const uint8_t> payload, const Status& verdict,
                          const std::vector<uint8_t>& out) {
  static HuffmanDecoder baseline_decoder(IsaKernel::kBaseline);  // kept, like the other
  std::vector<uint8_t> baseline(out.size());
  Status s = huffman ? baseline_decoder.Decompress(payload, baseline)
                     : BitPackDecompress(payload, baseline, IsaKernel::kBaseline);
  if (s.ok() != verdict.ok()) Broken("the baseline and BMI2 decoders disagree on a payload");
  if (s.ok() && baseline != out) Broken("the baseline and BMI2 decoders decode a payload differently");
}

void ExpectEncodersAgree(std::span<const uint8_t> src) {
  static HuffmanEncoder baseline_encoder(IsaKernel::kBaseline);
  std::vector<uint8_t> a = Compress(true, src), b(HuffmanBound(src.size()));
  Result<size_t> n = baseline_encoder.Compress(src, b);
  if (!n.ok()) Broken("the baseline Huffman encoder failed");
  b.resize(*n);
  if (a != b) Broken("the baseline and BMI2 Huffman encoders give different payloads");
  std::vector<uint8_t> c = Compress(false, src), d(BitPackBound(src.size()));
  Result<size_t> m = BitPackCompress(src, d, std::nullopt, IsaKernel::kBaseline);
  if (!m.ok()) Broken("the baseline bitpack encoder failed");
  d.resize(*m);
  if (c != d) Broken("the baseline and BMI2 bitpack encoders give different payloads");
}

TransformId SparseOf(uint8_t selector) { return SparseTransform(selector & 4 ? 4 : 2, (selector >> 3) & 7); }

// `raw` through the sparse-words encoder (forced) and back.
void ExpectSparseRoundTrip(TransformId transform, std::span<const uint8_t> raw, ChunkDecoder& decoder) {
  EncoderOptions options;
  options.transform = TransformChoice::kBitPlanes;
  options.bit_planes = transform;
  options.detect_zero_runs = false;
  ChunkEncoder encoder(options);
  EncodedChunk chunk;
  if (!encoder.Encode(raw, &chunk).ok()) Broken("the sparse-words encoder failed");
  std::vector<uint8_t> back(raw.size());
  if (chunk.codec == CodecId::kRaw && chunk.transform == TransformId::kNone) return;  // stored raw
  if (!decoder.Decode(chunk.codec, chunk.transform, chunk.payload, back).ok())
    Broken("a sparse-words payload the encoder wrote does not decode");
  if (!std::equal(back.begin(), back.end(), raw.begin())) Broken("a sparse-words round trip changed the bytes");
}

void WriteSeeds(const std::string& dir) {
  std::mt19937_64 rng(1);
  int count = 0;
  auto write = [&](bool huffman, const std::vector<uint8_t>& plane) {
    std::vector<uint8_t> input = {static_cast<uint8_t>(huffman ? 0 : 1), static_cast<uint8_t>(plane.size()),
                                  static_cast<uint8_t>(plane.size() >> 8), static_cast<uint8_t>(plane.size() >> 16)};
    const std::vector<uint8_t> payload = Compress(huffman, plane);
    input.insert(input.end(), payload.begin(), payload.end());
    std::ofstream(dir + "/seed-" + std::to_string(count++), std::ios::binary)
        .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
  };
  for (size_t size : {1, 7, 100, 5000, 70000}) {
    for (double p : {0.5, 0.3, 0.05}) {
      std::geometric_distribution<int> skewed(p);
      std::vector<uint8_t> plane(size);
      for (auto& b : plane) b = static_cast<uint8_t>(std::min(skewed(rng), 255));
      write(true, plane);
    }
    std::vector<uint8_t> plane(size);
    for (auto& b : plane) b = static_cast<uint8_t>((rng() & 0xf9) | 0x04);  // bits 1 and 2 constant
    write(false, plane);
  }
  // Sparse-words chunks: float-like words with runs of zero words.
  for (uint8_t selector : {0x02, 0x06, 0x0e, 0x1a, 0x26}) {
    const unsigned word = selector & 4 ? 4 : 2;
    for (size_t size : {9, 100, 5000}) {
      std::vector<uint8_t> raw(size);
      for (size_t i = 0; i < size; ++i) raw[i] = (i / word / 7) % 2 ? 0 : static_cast<uint8_t>(0x3c + rng() % 3);
      EncoderOptions options;
      options.transform = TransformChoice::kBitPlanes;
      options.bit_planes = SparseOf(selector);
      ChunkEncoder encoder(options);
      EncodedChunk chunk;
      if (!encoder.Encode(raw, &chunk).ok() || chunk.codec != CodecId::kPlanar) continue;
      std::vector<uint8_t> input = {selector, static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8), 0};
      input.insert(input.end(), chunk.payload.begin(), chunk.payload.end());
      std::ofstream(dir + "/seed-" + std::to_string(count++), std::ios::binary)
          .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
    }
  }
}

}  // namespace
}  // namespace vramflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    vramflow::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vramflow;
  static HuffmanDecoder decoder;  // kept from input to input, as BlockDecompressor keeps one
  std::span<const uint8_t> input(data, size);
  static const bool bmi2 = CpuHasBmi2();
  ExpectRoundTrip(true, input, decoder);
  ExpectRoundTrip(false, input, decoder);
  if (bmi2) ExpectEncodersAgree(input);
  static ChunkDecoder chunk_decoder;  // kept from input to input, as a reader keeps one
  ExpectSparseRoundTrip(SparseOf(size ? data[0] : 0), input, chunk_decoder);
  if (size < 4) return 0;
  if (data[0] & 2) {
    const TransformId transform = SparseOf(data[0]);
    const size_t raw_size = std::min<size_t>(data[1] | data[2] << 8 | data[3] << 16, kMaxDecodedBytes);
    std::vector<uint8_t> out(raw_size);
    Status s = chunk_decoder.Decode(CodecId::kPlanar, transform, input.subspan(4), out);
    if (!s.ok()) {
      if (s.code() != Status::Code::kCorruption)
        Broken("a malformed sparse-words chunk gave another error than corruption");
      return 0;
    }
    ExpectSparseRoundTrip(transform, out, chunk_decoder);
    return 0;
  }
  const bool huffman = (data[0] & 1) == 0;
  const size_t decoded = std::min<size_t>(data[1] | data[2] << 8 | data[3] << 16, kMaxDecodedBytes);
  std::span<const uint8_t> payload = input.subspan(4);
  std::vector<uint8_t> out(decoded);
  Status s = huffman ? decoder.Decompress(payload, out) : BitPackDecompress(payload, out);
  if (bmi2) ExpectBaselineAgrees(huffman, payload, s, out);
  if (!s.ok()) {
    if (s.code() != Status::Code::kCorruption) Broken("a malformed payload gave another error than corruption");
    return 0;
  }
  ExpectRoundTrip(huffman, out, decoder);
  return 0;
}
