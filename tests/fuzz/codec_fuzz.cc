// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted bytes straight into the plane codecs' decoders
// (huffman, bitpack), without the stream reader's checksums in front.
//
// Input: [u8 selector][u24 decoded size, little-endian][payload]. The
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
#include "codecs/huffman.h"

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
  if (size < 4) return 0;
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
