// SPDX-License-Identifier: MIT
// Legacy CRIU amdgpu-pages images: name recognition, and pack -> unpack
// reproducing the file byte for byte while the stream holds only the content.
#include "streamer/format/amdgpu_pages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/endian.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "tools/pack.h"
#include "tools/unpack.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

TEST(AmdgpuPagesNameTest, AcceptsUpstreamNames) {
  for (const char* name : {"amdgpu-pages-234-c1a2.img", "amdgpu-pages-1-0.img", "amdgpu-pages-0-ABCDEF.img",
                           "amdgpu-pages-12345678901234567890-deadbeef.img"}) {
    EXPECT_TRUE(IsAmdgpuPagesFileName(name)) << name;
  }
}

TEST(AmdgpuPagesNameTest, RejectsOtherNames) {
  for (const char* name :
       {"amdgpu-pages-x-1.img", "amdgpu-pages-1-.img", "amdgpu-kfd-1.img", "amdgpu-pages--1.img", "amdgpu-pages-1.img",
        "amdgpu-pages-1-g.img", "amdgpu-pages-1-1.im", "amdgpu-pages-1-1.img.bak", "xamdgpu-pages-1-1.img",
        "amdgpu-pages-.img", "amdgpu-pages-1-1-1.img", "amdgpu-pages- 1-1.img", "amdgpu-pages-1-1", ""}) {
    EXPECT_FALSE(IsAmdgpuPagesFileName(name)) << "'" << name << "'";
  }
}

TEST(AmdgpuPagesHeaderTest, EncodesInTheRequestedByteOrder) {
  uint8_t h[kAmdgpuPagesHeaderSize];
  EncodeAmdgpuPagesHeader(0x0102030405060708ull, true, h);
  EXPECT_EQ(h[0], 0x08);
  EXPECT_EQ(h[7], 0x01);
  EXPECT_EQ(DecodeAmdgpuPagesHeader(h, true), 0x0102030405060708ull);
  EncodeAmdgpuPagesHeader(0x0102030405060708ull, false, h);
  EXPECT_EQ(h[0], 0x01);
  EXPECT_EQ(h[7], 0x08);
  EXPECT_EQ(DecodeAmdgpuPagesHeader(h, false), 0x0102030405060708ull);
  // The host's own order is what upstream writes.
  uint64_t native = 0;
  EncodeAmdgpuPagesHeader(12345, HostIsLittleEndian(), h);
  std::memcpy(&native, h, sizeof(native));
  EXPECT_EQ(native, 12345u);
}

// Content of a legacy image: fp32 weights with a zero region, so the stream
// has DATA and ZERO_RUN frames.
std::vector<uint8_t> Content(size_t n) {
  std::vector<uint8_t> c = ModelBytes(DataKind::kFp32Weights, n, 17);
  if (n > 80000) std::fill(c.begin() + 16384, c.begin() + 65536, 0);
  return c;
}

std::vector<uint8_t> LegacyImage(const std::vector<uint8_t>& content, uint64_t header_value) {
  std::vector<uint8_t> file(kAmdgpuPagesHeaderSize);
  EncodeAmdgpuPagesHeader(header_value, HostIsLittleEndian(), file.data());
  file.insert(file.end(), content.begin(), content.end());
  return file;
}

// What the stream says about its objects.
class ObjectInspector final : public StreamVisitor {
 public:
  struct Object {
    ObjectMetadata metadata;
    uint64_t size = 0;
    uint64_t chunk_bytes = 0;
    std::vector<uint8_t> bytes;
  };
  Status OnObjectBegin(const ObjectState& o) override {
    objects.push_back(Object{o.metadata, o.size, 0, {}});
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    Object& o = objects.back();
    o.chunk_bytes += e.header.raw_size;
    if (o.bytes.size() < e.header.offset + e.header.raw_size) o.bytes.resize(e.header.offset + e.header.raw_size, 0);
    std::copy(e.data.begin(), e.data.end(), o.bytes.begin() + static_cast<ptrdiff_t>(e.header.offset));
    return Status::Ok();
  }
  std::vector<Object> objects;
};

ObjectInspector Inspect(const std::string& stream_path) {
  std::vector<uint8_t> stream = ReadFileBytes(stream_path);
  MemorySource source(stream);
  ObjectInspector inspector;
  Status s = ReadStream(source, inspector);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return inspector;
}

Status Pack(const std::vector<std::string>& inputs, const std::string& output, PackReport* report) {
  PackOptions options;
  options.inputs = inputs;
  options.output = output;
  options.pipeline.chunk_size = 16 * 1024;
  return RunPack(options, report);
}

Status Unpack(const std::string& input, const std::string& output, UnpackReport* report) {
  UnpackOptions options;
  options.input = input;
  options.output = output;
  return RunUnpack(options, report);
}

TEST(LegacyPagesTest, ImageRoundTripsAndTheStreamHoldsOnlyTheContent) {
  for (size_t n : {size_t{100003}, size_t{16384}, size_t{1}}) {
    TempDir dir;
    const std::vector<uint8_t> content = Content(n);
    const std::vector<uint8_t> image = LegacyImage(content, n);
    const std::string input = dir.File("amdgpu-pages-12-abcd.img");
    WriteFileBytes(input, image);

    PackReport pack_report;
    Status s = Pack({input}, dir.File("s.vfs"), &pack_report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(pack_report.objects, 1u);
    EXPECT_EQ(pack_report.legacy_images, 1u);
    EXPECT_EQ(pack_report.raw_bytes, n);

    ObjectInspector inspector = Inspect(dir.File("s.vfs"));
    ASSERT_EQ(inspector.objects.size(), 1u);
    const ObjectInspector::Object& o = inspector.objects[0];
    EXPECT_EQ(o.metadata.name, "amdgpu-pages-12-abcd.img");
    EXPECT_EQ(o.size, n);
    EXPECT_EQ(o.chunk_bytes, n);
    const std::string* format = o.metadata.Find(kLegacyFormatKey);
    ASSERT_NE(format, nullptr);
    EXPECT_EQ(*format, kLegacyFormatAmdgpuPages);
    const std::string* order = o.metadata.Find(kLegacyByteOrderKey);
    ASSERT_NE(order, nullptr);
    EXPECT_EQ(*order, HostIsLittleEndian() ? "le" : "be");
    EXPECT_TRUE(o.bytes == content) << "stream content is not the image minus its header";

    UnpackReport unpack_report;
    s = Unpack(dir.File("s.vfs"), dir.File("restored.img"), &unpack_report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(unpack_report.objects, 1u);
    EXPECT_TRUE(ReadFileBytes(dir.File("restored.img")) == image) << "size " << n;
  }
}

TEST(LegacyPagesTest, HeaderOnlyImageRoundTrips) {
  TempDir dir;
  const std::vector<uint8_t> image = LegacyImage({}, 0);
  WriteFileBytes(dir.File("amdgpu-pages-3-1.img"), image);
  PackReport pack_report;
  ASSERT_TRUE(Pack({dir.File("amdgpu-pages-3-1.img")}, dir.File("s.vfs"), &pack_report).ok());
  EXPECT_EQ(pack_report.legacy_images, 1u);
  ObjectInspector inspector = Inspect(dir.File("s.vfs"));
  ASSERT_EQ(inspector.objects.size(), 1u);
  EXPECT_EQ(inspector.objects[0].size, 0u);
  UnpackReport unpack_report;
  Status s = Unpack(dir.File("s.vfs"), dir.File("restored.img"), &unpack_report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ReadFileBytes(dir.File("restored.img")) == image);
}

// A file that is not a well-formed image is packed whole, as a plain file.
void ExpectPackedAsPlainFile(const std::string& name, const std::vector<uint8_t>& file) {
  TempDir dir;
  WriteFileBytes(dir.File(name), file);
  PackReport pack_report;
  Status s = Pack({dir.File(name)}, dir.File("s.vfs"), &pack_report);
  ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
  EXPECT_EQ(pack_report.legacy_images, 0u) << name;
  EXPECT_EQ(pack_report.raw_bytes, file.size()) << name;

  ObjectInspector inspector = Inspect(dir.File("s.vfs"));
  ASSERT_EQ(inspector.objects.size(), 1u);
  const ObjectInspector::Object& o = inspector.objects[0];
  EXPECT_EQ(o.size, file.size()) << name;
  EXPECT_EQ(o.metadata.Find(kLegacyFormatKey), nullptr) << name;
  EXPECT_EQ(o.metadata.Find(kLegacyByteOrderKey), nullptr) << name;
  EXPECT_TRUE(o.bytes == file) << name;

  UnpackReport unpack_report;
  s = Unpack(dir.File("s.vfs"), dir.File("restored"), &unpack_report);
  ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
  EXPECT_TRUE(ReadFileBytes(dir.File("restored")) == file) << name;
}

TEST(LegacyPagesTest, WrongHeaderIsPackedAsAPlainFile) {
  const std::vector<uint8_t> content = Content(100003);
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", LegacyImage(content, content.size() + 1));
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", LegacyImage(content, content.size() - 1));
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", LegacyImage(content, 0));
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", LegacyImage(content, ~uint64_t{0}));
}

TEST(LegacyPagesTest, FileShorterThanAHeaderIsPackedAsAPlainFile) {
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", {1, 2, 3, 4, 5});
  ExpectPackedAsPlainFile("amdgpu-pages-12-abcd.img", {});
}

TEST(LegacyPagesTest, ValidHeaderUnderAnotherNameIsAPlainFile) {
  const std::vector<uint8_t> content = Content(5000);
  ExpectPackedAsPlainFile("amdgpu-pages-x-abcd.img", LegacyImage(content, content.size()));
  ExpectPackedAsPlainFile("pages-12-abcd.img", LegacyImage(content, content.size()));
}

TEST(LegacyPagesTest, ImagesAndPlainFilesUnpackIntoADirectory) {
  TempDir dir;
  const std::vector<uint8_t> a = LegacyImage(Content(100003), 100003);
  const std::vector<uint8_t> b = ModelBytes(DataKind::kBf16Weights, 40000, 3);
  const std::vector<uint8_t> c = LegacyImage(Content(777), 777);
  WriteFileBytes(dir.File("amdgpu-pages-1-a.img"), a);
  WriteFileBytes(dir.File("plain.bin"), b);
  WriteFileBytes(dir.File("amdgpu-pages-2-b.img"), c);
  PackReport pack_report;
  ASSERT_TRUE(Pack({dir.File("amdgpu-pages-1-a.img"), dir.File("plain.bin"), dir.File("amdgpu-pages-2-b.img")},
                   dir.File("s.vfs"), &pack_report)
                  .ok());
  EXPECT_EQ(pack_report.objects, 3u);
  EXPECT_EQ(pack_report.legacy_images, 2u);
  UnpackReport unpack_report;
  Status s = Unpack(dir.File("s.vfs"), dir.File("out/"), &unpack_report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(unpack_report.objects, 3u);
  EXPECT_TRUE(ReadFileBytes(dir.File("out/amdgpu-pages-1-a.img")) == a);
  EXPECT_TRUE(ReadFileBytes(dir.File("out/plain.bin")) == b);
  EXPECT_TRUE(ReadFileBytes(dir.File("out/amdgpu-pages-2-b.img")) == c);
}

TEST(LegacyPagesTest, UnpackWritesTheRecordedByteOrder) {
  // A stream from a big-endian host: the header must come back big-endian.
  TempDir dir;
  const std::vector<uint8_t> content = Content(3000);
  MemorySink sink;
  StreamWriter writer(&sink, StreamHeader{});
  ASSERT_TRUE(writer.Start().ok());
  ObjectMetadata meta{"amdgpu-pages-5-f.img",
                      {{kLegacyFormatKey, kLegacyFormatAmdgpuPages}, {kLegacyByteOrderKey, "be"}}};
  Result<uint32_t> id = writer.BeginObject(meta, content.size());
  ASSERT_TRUE(id.ok());
  ChunkEncoder encoder(EncoderOptions{});
  EncodedChunk chunk;
  ASSERT_TRUE(encoder.Encode(content, &chunk).ok());
  ASSERT_TRUE(writer.AddChunk(*id, 0, content.size(), chunk).ok());
  ASSERT_TRUE(writer.EndObject(*id).ok());
  ASSERT_TRUE(writer.Finish().ok());
  WriteFileBytes(dir.File("be.vfs"), sink.bytes());

  UnpackReport report;
  Status s = Unpack(dir.File("be.vfs"), dir.File("restored.img"), &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<uint8_t> restored = ReadFileBytes(dir.File("restored.img"));
  ASSERT_EQ(restored.size(), kAmdgpuPagesHeaderSize + content.size());
  const uint8_t expected_header[8] = {0, 0, 0, 0, 0, 0, 0x0b, 0xb8};  // 3000, big-endian
  EXPECT_TRUE(std::equal(expected_header, expected_header + 8, restored.begin()));
  EXPECT_TRUE(std::equal(content.begin(), content.end(), restored.begin() + 8));
}

}  // namespace
}  // namespace vramflow
