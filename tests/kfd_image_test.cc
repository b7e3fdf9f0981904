// SPDX-License-Identifier: MIT
// CRIU amdgpu metadata images: the schema against upstream's field table, the
// protobuf encoding byte for byte (keys and varints computed by hand from the
// protobuf encoding rules, not by the library under test), the 8-byte size
// framing, every way a read can fail, and the file names.
#include "plugin/kfd_image.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/endian.h"
#include "criu_amdgpu.pb.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A length-delimited field with a one-byte key and a one-byte length.
Bytes Nested(uint8_t key, const Bytes& body) {
  EXPECT_LT(body.size(), 128u);
  return Cat({{key, static_cast<uint8_t>(body.size())}, body});
}

Bytes Serialized(const google::protobuf::MessageLite& msg) {
  std::string s = msg.SerializeAsString();
  return Bytes(s.begin(), s.end());
}

// ---- Schema: section 2.4 of the research notes as a table ----

struct FieldSpec {
  const char* name;
  int number;
  FieldDescriptor::Type type;
  bool repeated;  // otherwise required
};

constexpr auto kU32 = FieldDescriptor::TYPE_UINT32;
constexpr auto kU64 = FieldDescriptor::TYPE_UINT64;
constexpr auto kBytes = FieldDescriptor::TYPE_BYTES;
constexpr auto kMsg = FieldDescriptor::TYPE_MESSAGE;

// vramflow's own fields are optional (upstream's are all required or
// repeated) and numbered from this up.
constexpr int kFirstVramflowField = 100;

void ExpectFields(const Descriptor* d, std::initializer_list<FieldSpec> specs) {
  SCOPED_TRACE(d->full_name());
  int upstream_fields = 0;
  for (int i = 0; i < d->field_count(); ++i) upstream_fields += d->field(i)->label() != FieldDescriptor::LABEL_OPTIONAL;
  EXPECT_EQ(upstream_fields, static_cast<int>(specs.size()));
  for (const FieldSpec& spec : specs) {
    const FieldDescriptor* f = d->FindFieldByNumber(spec.number);
    ASSERT_NE(f, nullptr) << "no field " << spec.number << " (" << spec.name << ")";
    EXPECT_EQ(f->name(), spec.name) << "field " << spec.number;
    EXPECT_EQ(f->type(), spec.type) << spec.name;
    EXPECT_EQ(f->label(), spec.repeated ? FieldDescriptor::LABEL_REPEATED : FieldDescriptor::LABEL_REQUIRED)
        << spec.name;
  }
}

TEST(KfdImageSchemaTest, MessagesMatchUpstreamFieldTable) {
  ExpectFields(criu::DevIolink::descriptor(), {{"type", 1, kU32, false}, {"node_to_id", 2, kU32, false}});
  ExpectFields(criu::KfdDeviceEntry::descriptor(), {{"node_id", 1, kU32, false},
                                                    {"gpu_id", 2, kU32, false},
                                                    {"cpu_cores_count", 3, kU32, false},
                                                    {"simd_count", 4, kU32, false},
                                                    {"mem_banks_count", 5, kU32, false},
                                                    {"caches_count", 6, kU32, false},
                                                    {"io_links_count", 7, kU32, false},
                                                    {"max_waves_per_simd", 8, kU32, false},
                                                    {"lds_size_in_kb", 9, kU32, false},
                                                    {"gds_size_in_kb", 10, kU32, false},
                                                    {"num_gws", 11, kU32, false},
                                                    {"wave_front_size", 12, kU32, false},
                                                    {"array_count", 13, kU32, false},
                                                    {"simd_arrays_per_engine", 14, kU32, false},
                                                    {"cu_per_simd_array", 15, kU32, false},
                                                    {"simd_per_cu", 16, kU32, false},
                                                    {"max_slots_scratch_cu", 17, kU32, false},
                                                    {"vendor_id", 18, kU32, false},
                                                    {"device_id", 19, kU32, false},
                                                    {"domain", 20, kU32, false},
                                                    {"drm_render_minor", 21, kU32, false},
                                                    {"hive_id", 22, kU64, false},
                                                    {"num_sdma_engines", 23, kU32, false},
                                                    {"num_sdma_xgmi_engines", 24, kU32, false},
                                                    {"num_sdma_queues_per_engine", 25, kU32, false},
                                                    {"num_cp_queues", 26, kU32, false},
                                                    {"fw_version", 27, kU32, false},
                                                    {"capability", 28, kU32, false},
                                                    {"sdma_fw_version", 29, kU32, false},
                                                    {"vram_public", 30, kU32, false},
                                                    {"vram_size", 31, kU64, false},
                                                    {"iolinks", 32, kMsg, true}});
  ExpectFields(criu::KfdBoEntry::descriptor(), {{"addr", 1, kU64, false},
                                                {"size", 2, kU64, false},
                                                {"offset", 3, kU64, false},
                                                {"alloc_flags", 4, kU32, false},
                                                {"gpu_id", 5, kU32, false},
                                                {"handle", 6, kU32, false}});
  ExpectFields(criu::CriuKfd::descriptor(), {{"pid", 1, kU32, false},
                                             {"num_of_gpus", 2, kU32, false},
                                             {"num_of_cpus", 3, kU32, false},
                                             {"device_entries", 4, kMsg, true},
                                             {"num_of_bos", 5, kU64, false},
                                             {"bo_entries", 6, kMsg, true},
                                             {"num_of_objects", 7, kU32, false},
                                             {"shared_mem_size", 8, kU64, false},
                                             {"shared_mem_magic", 9, kU32, false},
                                             {"priv_data", 10, kBytes, false}});
  ExpectFields(criu::DrmBoEntry::descriptor(), {{"addr", 1, kU64, false},
                                                {"size", 2, kU64, false},
                                                {"offset", 3, kU64, false},
                                                {"alloc_flags", 4, kU64, false},
                                                {"alignment", 5, kU64, false},
                                                {"preferred_domains", 6, kU32, false},
                                                {"handle", 7, kU32, false},
                                                {"is_import", 8, kU32, false},
                                                {"num_of_vms", 9, kU32, false},
                                                {"vm_entries", 10, kMsg, true}});
  ExpectFields(
      criu::DrmVmEntry::descriptor(),
      {{"addr", 1, kU64, false}, {"size", 2, kU64, false}, {"offset", 3, kU64, false}, {"flags", 4, kU64, false}});
  ExpectFields(criu::CriuRenderNode::descriptor(), {{"gpu_id", 1, kU32, false},
                                                    {"id", 2, kU32, false},
                                                    {"drm_render_minor", 3, kU32, false},
                                                    {"num_of_bos", 4, kU64, false},
                                                    {"bo_entries", 5, kMsg, true}});
  ExpectFields(criu::CriuDmabufNode::descriptor(), {{"gem_handle", 1, kU32, false}});
  // Repeated fields hold the right messages.
  EXPECT_EQ(criu::KfdDeviceEntry::descriptor()->FindFieldByNumber(32)->message_type(), criu::DevIolink::descriptor());
  EXPECT_EQ(criu::CriuKfd::descriptor()->FindFieldByNumber(4)->message_type(), criu::KfdDeviceEntry::descriptor());
  EXPECT_EQ(criu::CriuKfd::descriptor()->FindFieldByNumber(6)->message_type(), criu::KfdBoEntry::descriptor());
  EXPECT_EQ(criu::DrmBoEntry::descriptor()->FindFieldByNumber(10)->message_type(), criu::DrmVmEntry::descriptor());
  EXPECT_EQ(criu::CriuRenderNode::descriptor()->FindFieldByNumber(5)->message_type(), criu::DrmBoEntry::descriptor());
}

// vramflow's additions to criu_kfd are optional (an upstream image without
// them parses) and far from upstream's numbers; upstream's protobuf-c
// unpack keeps them aside as unknown fields.
TEST(KfdImageSchemaTest, VramflowFieldsAreOptionalAndOutsideUpstreamsNumbers) {
  const Descriptor* kfd = criu::CriuKfd::descriptor();
  for (int i = 0; i < kfd->field_count(); ++i) {
    const FieldDescriptor* f = kfd->field(i);
    if (f->label() == FieldDescriptor::LABEL_OPTIONAL) {
      EXPECT_GE(f->number(), kFirstVramflowField) << f->name();
    }
  }
  for (int number : {1001, 1002}) {
    const FieldDescriptor* f = kfd->FindFieldByNumber(number);
    ASSERT_NE(f, nullptr) << number;
    EXPECT_EQ(f->label(), FieldDescriptor::LABEL_OPTIONAL) << f->name();
    EXPECT_EQ(f->message_type(), criu::VramflowShmFile::descriptor()) << f->name();
  }
  ExpectFields(criu::VramflowShmFile::descriptor(),
               {{"mode", 1, kU32, false}, {"uid", 2, kU32, false}, {"gid", 3, kU32, false}});
  criu::CriuKfd upstream;  // every upstream field set, none of ours
  upstream.set_pid(1);
  upstream.set_num_of_gpus(0);
  upstream.set_num_of_cpus(0);
  upstream.set_num_of_bos(0);
  upstream.set_num_of_objects(0);
  upstream.set_shared_mem_size(0);
  upstream.set_shared_mem_magic(0);
  upstream.set_priv_data("");
  EXPECT_TRUE(upstream.IsInitialized());
}

// ---- Wire bytes, computed by hand ----
//
// A key is the varint (field_number << 3) | wire_type; wire type 0 is a
// varint, 2 length-delimited. Fields 1..15 have one-byte keys; for 16..31 the
// varint (n << 3) is two bytes, n << 3 then 0x01. Varints are 7 bits per byte,
// low group first, high bit set on all but the last byte. Required fields are
// always present (protobuf-c packs them even when zero), in field-number order.

// A GPU node: every uint32 field n holds n, except gpu_id; hive_id and
// vram_size exceed 32 bits, so a uint32 field there would truncate them.
void FillDevice(criu::KfdDeviceEntry* d) {
  d->set_node_id(1);
  d->set_gpu_id(0x1a2b);
  d->set_cpu_cores_count(3);
  d->set_simd_count(4);
  d->set_mem_banks_count(5);
  d->set_caches_count(6);
  d->set_io_links_count(7);
  d->set_max_waves_per_simd(8);
  d->set_lds_size_in_kb(9);
  d->set_gds_size_in_kb(10);
  d->set_num_gws(11);
  d->set_wave_front_size(12);
  d->set_array_count(13);
  d->set_simd_arrays_per_engine(14);
  d->set_cu_per_simd_array(15);
  d->set_simd_per_cu(16);
  d->set_max_slots_scratch_cu(17);
  d->set_vendor_id(18);
  d->set_device_id(19);
  d->set_domain(20);
  d->set_drm_render_minor(21);
  d->set_hive_id(0x0123456789abcdefull);
  d->set_num_sdma_engines(23);
  d->set_num_sdma_xgmi_engines(24);
  d->set_num_sdma_queues_per_engine(25);
  d->set_num_cp_queues(26);
  d->set_fw_version(27);
  d->set_capability(28);
  d->set_sdma_fw_version(29);
  d->set_vram_public(30);
  d->set_vram_size(uint64_t{1} << 34);  // 16 GiB
  criu::DevIolink* link = d->add_iolinks();
  link->set_type(2);
  link->set_node_to_id(1);
}

const Bytes kDeviceBytes = {
    0x08, 0x01,                                                              // 1 node_id = 1
    0x10, 0xab, 0x34,                                                        // 2 gpu_id = 0x1a2b
    0x18, 0x03, 0x20, 0x04, 0x28, 0x05, 0x30, 0x06, 0x38, 0x07,              // 3..7: key n << 3, value n
    0x40, 0x08, 0x48, 0x09, 0x50, 0x0a, 0x58, 0x0b, 0x60, 0x0c,              // 8..12
    0x68, 0x0d, 0x70, 0x0e, 0x78, 0x0f,                                      // 13..15
    0x80, 0x01, 0x10, 0x88, 0x01, 0x11, 0x90, 0x01, 0x12,                    // 16..18: two-byte keys
    0x98, 0x01, 0x13, 0xa0, 0x01, 0x14, 0xa8, 0x01, 0x15,                    // 19..21
    0xb0, 0x01, 0xef, 0x9b, 0xaf, 0xcd, 0xf8, 0xac, 0xd1, 0x91, 0x01,        // 22 hive_id = 0x0123456789abcdef
    0xb8, 0x01, 0x17, 0xc0, 0x01, 0x18, 0xc8, 0x01, 0x19, 0xd0, 0x01, 0x1a,  // 23..26
    0xd8, 0x01, 0x1b, 0xe0, 0x01, 0x1c, 0xe8, 0x01, 0x1d, 0xf0, 0x01, 0x1e,  // 27..30
    0xf8, 0x01, 0x80, 0x80, 0x80, 0x80, 0x40,                                // 31 vram_size = 1 << 34
    0x82, 0x02, 0x04, 0x08, 0x02, 0x10, 0x01,  // 32 iolinks, key (32 << 3) | 2 = 0x102: {type 2, node_to_id 1}
};

void FillBo(criu::KfdBoEntry* bo) {
  bo->set_addr(0x7f1234560000ull);
  bo->set_size(2u << 20);
  bo->set_offset(0x1000);
  bo->set_alloc_flags(0x80000001u);  // VRAM | WRITABLE: the high bit shows uint32, not int32
  bo->set_gpu_id(0x1a2b);
  bo->set_handle(5);
}

const Bytes kBoBytes = {
    0x08, 0x80, 0x80, 0xd8, 0xa2, 0xa3, 0xe2, 0x1f,  // 1 addr = 0x7f1234560000
    0x10, 0x80, 0x80, 0x80, 0x01,                    // 2 size = 2 MiB
    0x18, 0x80, 0x20,                                // 3 offset = 0x1000
    0x20, 0x81, 0x80, 0x80, 0x80, 0x08,              // 4 alloc_flags = 0x80000001
    0x28, 0xab, 0x34,                                // 5 gpu_id = 0x1a2b
    0x30, 0x05,                                      // 6 handle = 5
};

Bytes PrivData() {
  Bytes priv(300);  // 300 = varint 0xac 0x02: a two-byte length
  for (size_t i = 0; i < priv.size(); ++i) priv[i] = static_cast<uint8_t>(i * 7 + 1);
  return priv;
}

criu::CriuKfd MakeKfd() {
  criu::CriuKfd kfd;
  kfd.set_pid(4242);
  kfd.set_num_of_gpus(2);
  kfd.set_num_of_cpus(1);
  FillDevice(kfd.add_device_entries());
  FillDevice(kfd.add_device_entries());
  kfd.set_num_of_bos(2);
  FillBo(kfd.add_bo_entries());
  FillBo(kfd.add_bo_entries());
  kfd.set_num_of_objects(7);
  kfd.set_shared_mem_size(uint64_t{1} << 33);
  kfd.set_shared_mem_magic(0x4d524f43u);
  Bytes priv = PrivData();
  kfd.set_priv_data(priv.data(), priv.size());
  return kfd;
}

Bytes KfdBytes() {
  return Cat({
      {0x08, 0x92, 0x21},                    // 1 pid = 4242
      {0x10, 0x02},                          // 2 num_of_gpus = 2
      {0x18, 0x01},                          // 3 num_of_cpus = 1
      Nested(0x22, kDeviceBytes),            // 4 device_entries, (4 << 3) | 2
      Nested(0x22, kDeviceBytes),            //
      {0x28, 0x02},                          // 5 num_of_bos = 2
      Nested(0x32, kBoBytes),                // 6 bo_entries, (6 << 3) | 2
      Nested(0x32, kBoBytes),                //
      {0x38, 0x07},                          // 7 num_of_objects = 7
      {0x40, 0x80, 0x80, 0x80, 0x80, 0x20},  // 8 shared_mem_size = 1 << 33
      {0x48, 0xc3, 0x9e, 0xc9, 0xea, 0x04},  // 9 shared_mem_magic = 0x4d524f43
      {0x52, 0xac, 0x02},                    // 10 priv_data, (10 << 3) | 2, length 300
      PrivData(),
  });
}

TEST(KfdImageWireTest, DeviceEntryEncodesEveryFieldAsUpstream) {
  criu::KfdDeviceEntry d;
  FillDevice(&d);
  EXPECT_EQ(Serialized(d), kDeviceBytes);
}

TEST(KfdImageWireTest, BoEntryEncodesAsUpstream) {
  criu::KfdBoEntry bo;
  FillBo(&bo);
  EXPECT_EQ(Serialized(bo), kBoBytes);
}

TEST(KfdImageWireTest, CriuKfdEncodesAsUpstream) {
  Bytes got = Serialized(MakeKfd());
  Bytes want = KfdBytes();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want);
  // The spots the brief calls out, located independently of the table above.
  auto find = [&](const Bytes& needle) {
    return std::search(got.begin(), got.end(), needle.begin(), needle.end()) != got.end();
  };
  EXPECT_TRUE(find({0xf8, 0x01, 0x80, 0x80, 0x80, 0x80, 0x40}));  // vram_size, field 31 varint
  EXPECT_TRUE(find({0xb0, 0x01, 0xef, 0x9b}));                    // hive_id, field 22 varint
  EXPECT_TRUE(find({0x30, 0x05}));                                // handle, field 6 varint
  EXPECT_EQ(got[got.size() - 303], 0x52);                         // priv_data key just before its 300 bytes
}

TEST(KfdImageWireTest, RenderNodeAndDmabufEncodeAsUpstream) {
  criu::CriuRenderNode node;
  node.set_gpu_id(0xbeef);
  node.set_id(3);
  node.set_drm_render_minor(128);
  node.set_num_of_bos(1);
  criu::DrmBoEntry* bo = node.add_bo_entries();
  bo->set_addr(0x1000);
  bo->set_size(0x2000);
  bo->set_offset(0x3000);
  bo->set_alloc_flags(uint64_t{1} << 40);
  bo->set_alignment(0x1000);
  bo->set_preferred_domains(4);
  bo->set_handle(9);
  bo->set_is_import(1);
  bo->set_num_of_vms(1);
  criu::DrmVmEntry* vm = bo->add_vm_entries();
  vm->set_addr(0x10);
  vm->set_size(0x20);
  vm->set_offset(0x30);
  vm->set_flags(uint64_t{1} << 35);
  Bytes vm_bytes = {0x08, 0x10, 0x10, 0x20, 0x18, 0x30, 0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  Bytes bo_bytes = Cat({{0x08, 0x80, 0x20},                                // 1 addr = 0x1000
                        {0x10, 0x80, 0x40},                                // 2 size = 0x2000
                        {0x18, 0x80, 0x60},                                // 3 offset = 0x3000
                        {0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20},        // 4 alloc_flags = 1 << 40
                        {0x28, 0x80, 0x20},                                // 5 alignment = 0x1000
                        {0x30, 0x04, 0x38, 0x09, 0x40, 0x01, 0x48, 0x01},  // 6..9
                        Nested(0x52, vm_bytes)});                          // 10 vm_entries
  Bytes want = Cat({{0x08, 0xef, 0xfd, 0x02},                              // 1 gpu_id = 0xbeef
                    {0x10, 0x03, 0x18, 0x80, 0x01, 0x20, 0x01},            // 2 id, 3 minor = 128, 4 num_of_bos
                    Nested(0x2a, bo_bytes)});                              // 5 bo_entries
  EXPECT_EQ(Serialized(node), want);

  criu::CriuDmabufNode dmabuf;
  dmabuf.set_gem_handle(300);
  EXPECT_EQ(Serialized(dmabuf), (Bytes{0x08, 0xac, 0x02}));
}

// ---- Decoding what protobuf-c writes ----

Bytes WithHeader(const Bytes& body) {
  Bytes image(kImageSizeHeaderBytes + body.size());
  StoreLE64(image.data(), body.size());
  std::copy(body.begin(), body.end(), image.begin() + kImageSizeHeaderBytes);
  return image;
}

TEST(KfdImageDecodeTest, ReadsHandWrittenCriuKfd) {
  // One device, one BO, zero-valued required fields still present.
  Bytes body = Cat({{0x08, 0x92, 0x21, 0x10, 0x01, 0x18, 0x00},  // pid 4242, 1 GPU, 0 CPUs
                    Nested(0x22, kDeviceBytes),
                    {0x28, 0x01},
                    Nested(0x32, kBoBytes),
                    {0x38, 0x00, 0x40, 0x00, 0x48, 0x00},  // no objects, no shared memory
                    {0x52, 0x03, 'a', 'b', 'c'}});
  Bytes image = Cat({{static_cast<uint8_t>(body.size()), 0, 0, 0, 0, 0, 0, 0}, body});  // little-endian size
  criu::CriuKfd kfd;
  ASSERT_TRUE(DecodeImage(image, &kfd, "amdgpu-kfd-7.img").ok());
  EXPECT_EQ(kfd.pid(), 4242u);
  EXPECT_EQ(kfd.num_of_gpus(), 1u);
  EXPECT_EQ(kfd.num_of_cpus(), 0u);
  EXPECT_EQ(kfd.num_of_bos(), 1u);
  EXPECT_EQ(kfd.num_of_objects(), 0u);
  EXPECT_EQ(kfd.shared_mem_size(), 0u);
  EXPECT_EQ(kfd.priv_data(), "abc");
  ASSERT_EQ(kfd.device_entries_size(), 1);
  const criu::KfdDeviceEntry& d = kfd.device_entries(0);
  EXPECT_EQ(d.node_id(), 1u);
  EXPECT_EQ(d.gpu_id(), 0x1a2bu);
  EXPECT_EQ(d.cu_per_simd_array(), 15u);
  EXPECT_EQ(d.simd_per_cu(), 16u);
  EXPECT_EQ(d.drm_render_minor(), 21u);
  EXPECT_EQ(d.hive_id(), 0x0123456789abcdefull);
  EXPECT_EQ(d.num_sdma_engines(), 23u);
  EXPECT_EQ(d.vram_public(), 30u);
  EXPECT_EQ(d.vram_size(), uint64_t{1} << 34);
  ASSERT_EQ(d.iolinks_size(), 1);
  EXPECT_EQ(d.iolinks(0).type(), 2u);
  EXPECT_EQ(d.iolinks(0).node_to_id(), 1u);
  EXPECT_EQ(Serialized(d), kDeviceBytes);  // and nothing else was set
  ASSERT_EQ(kfd.bo_entries_size(), 1);
  const criu::KfdBoEntry& bo = kfd.bo_entries(0);
  EXPECT_EQ(bo.addr(), 0x7f1234560000ull);
  EXPECT_EQ(bo.size(), 2u << 20);
  EXPECT_EQ(bo.offset(), 0x1000u);
  EXPECT_EQ(bo.alloc_flags(), 0x80000001u);
  EXPECT_EQ(bo.gpu_id(), 0x1a2bu);
  EXPECT_EQ(bo.handle(), 5u);
}

TEST(KfdImageDecodeTest, ReadsHandWrittenDmabufNode) {
  const Bytes image = {0x02, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x2a};  // size 2, gem_handle = 42
  criu::CriuDmabufNode node;
  ASSERT_TRUE(DecodeImage(image, &node, "amdgpu-dmabuf_9.img").ok());
  EXPECT_EQ(node.gem_handle(), 42u);
}

// ---- Framing round trip ----

TEST(KfdImageRoundTripTest, HeaderIsLittleEndianProtobufSize) {
  criu::CriuKfd kfd = MakeKfd();
  MemorySink sink;
  ASSERT_TRUE(WriteImage(sink, kfd).ok());
  EXPECT_FALSE(sink.committed());  // the caller commits
  const Bytes& image = sink.bytes();
  ASSERT_GE(image.size(), kImageSizeHeaderBytes);
  EXPECT_EQ(LoadLE64(image.data()), kfd.ByteSizeLong());
  EXPECT_EQ(image.size(), kImageSizeHeaderBytes + kfd.ByteSizeLong());
  const size_t size = kfd.ByteSizeLong();
  EXPECT_EQ(size, 584u);  // 7 + 2 * 100 + 2 + 2 * 29 + 2 + 6 + 6 + 3 + 300: header 0x48 0x02 0 ...
  const Bytes header = {static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8), 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(Bytes(image.begin(), image.begin() + 8), header);
  EXPECT_EQ(Bytes(image.begin() + 8, image.end()), KfdBytes());

  MemorySource source(image, /*max_read=*/3);  // short reads everywhere
  criu::CriuKfd back;
  back.set_pid(1);  // overwritten, not merged
  ASSERT_TRUE(ReadImage(source, &back, "amdgpu-kfd-7.img").ok());
  EXPECT_EQ(back.SerializeAsString(), kfd.SerializeAsString());
  EXPECT_EQ(back.device_entries_size(), 2);
}

TEST(KfdImageRoundTripTest, BodyLargerThanOneReadStep) {
  criu::CriuKfd kfd = MakeKfd();
  std::string priv(3 << 20, '\0');
  for (size_t i = 0; i < priv.size(); ++i) priv[i] = static_cast<char>(i * 131 >> 3);
  kfd.set_priv_data(priv);
  Result<Bytes> image = EncodeImage(kfd, "big");
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  criu::CriuKfd back;
  ASSERT_TRUE(DecodeImage(*image, &back, "big").ok());
  EXPECT_EQ(back.priv_data(), priv);
}

TEST(KfdImageRoundTripTest, EmptyRepeatedFieldsAndZeroValues) {
  criu::CriuDmabufNode node;
  node.set_gem_handle(0);
  MemorySink sink;
  ASSERT_TRUE(WriteImage(sink, node).ok());
  EXPECT_EQ(sink.bytes(), WithHeader({0x08, 0x00}));  // a required zero is still written
  criu::CriuDmabufNode back;
  ASSERT_TRUE(DecodeImage(sink.bytes(), &back, "x").ok());
  EXPECT_TRUE(back.has_gem_handle());
}

// ---- Corruption ----

constexpr char kName[] = "amdgpu-kfd-7.img";

Status Decode(const Bytes& image) {
  criu::CriuKfd kfd;
  return DecodeImage(image, &kfd, kName);
}

void ExpectError(const Status& s, Status::Code code, const std::string& at) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(kName));
  EXPECT_THAT(s.message(), HasSubstr(at));
}

TEST(KfdImageCorruptionTest, EmptyInputIsTruncatedHeader) {
  ExpectError(Decode({}), Status::Code::kTruncated, "at byte 0");
}

TEST(KfdImageCorruptionTest, ShortSizeHeaderIsTruncated) {
  Bytes image = WithHeader(KfdBytes());
  image.resize(5);
  ExpectError(Decode(image), Status::Code::kTruncated, "at byte 5");
}

TEST(KfdImageCorruptionTest, OversizedContentSizeIsCorruption) {
  Bytes image = WithHeader(KfdBytes());
  StoreLE64(image.data(), kMaxImageContentSize + 1);
  Status s = Decode(image);
  ExpectError(s, Status::Code::kCorruption, "at byte 0");
  EXPECT_THAT(s.message(), HasSubstr(std::to_string(kMaxImageContentSize + 1)));
  // A big-endian header of a small image reads as a huge size: refused too.
  Bytes be = WithHeader(KfdBytes());
  uint64_t size = LoadLE64(be.data());
  StoreLE64(be.data(), ByteSwap(size));
  ExpectError(Decode(be), Status::Code::kCorruption, "at byte 0");
}

TEST(KfdImageCorruptionTest, SizeAtTheLimitOverATinyInputIsTruncated) {
  Bytes image = WithHeader({0x08, 0x01});
  StoreLE64(image.data(), kMaxImageContentSize);  // read in steps: no 1 GiB allocation
  ExpectError(Decode(image), Status::Code::kTruncated, "at byte 10");
}

TEST(KfdImageCorruptionTest, ShortBodyIsTruncated) {
  Bytes image = WithHeader(KfdBytes());
  image.pop_back();
  ExpectError(Decode(image), Status::Code::kTruncated, "at byte " + std::to_string(image.size()));
}

TEST(KfdImageCorruptionTest, TrailingBytesAreCorruption) {
  Bytes image = WithHeader(KfdBytes());
  size_t end = image.size();
  image.push_back(0);
  ExpectError(Decode(image), Status::Code::kCorruption, "at byte " + std::to_string(end));
}

TEST(KfdImageCorruptionTest, UnparsableBodyIsCorruption) {
  // Key 0x08, then a varint whose continuation bit never clears.
  ExpectError(Decode(WithHeader({0x08, 0xff, 0xff})), Status::Code::kCorruption, "at byte 8");
  // A length-delimited field longer than the body.
  ExpectError(Decode(WithHeader({0x52, 0x10, 0x00})), Status::Code::kCorruption, "at byte 8");
}

TEST(KfdImageCorruptionTest, MissingRequiredFieldIsCorruption) {
  criu::CriuKfd kfd = MakeKfd();
  kfd.clear_priv_data();
  kfd.mutable_device_entries(1)->clear_vram_size();
  std::string partial = kfd.SerializePartialAsString();
  Status s = Decode(WithHeader(Bytes(partial.begin(), partial.end())));
  ExpectError(s, Status::Code::kCorruption, "at byte 8");
  EXPECT_THAT(s.message(), HasSubstr("priv_data"));
  EXPECT_THAT(s.message(), HasSubstr("device_entries[1].vram_size"));
}

TEST(KfdImageCorruptionTest, WrongWireTypeLeavesRequiredFieldUnset) {
  // vram_size sent as fixed64 (wire type 1, key 0xf9 0x01) instead of a
  // varint: protobuf keeps it as an unknown field, so vram_size is missing.
  Bytes device(kDeviceBytes.begin(), kDeviceBytes.end() - 14);  // up to field 30
  device.insert(device.end(), {0xf9, 0x01, 0, 0, 0, 0, 4, 0, 0, 0});
  criu::KfdDeviceEntry d;
  Status s = DecodeImage(WithHeader(device), &d, kName);
  ExpectError(s, Status::Code::kCorruption, "at byte 8");
  EXPECT_THAT(s.message(), HasSubstr("vram_size"));
}

class FailingSource final : public ByteSource {
 public:
  explicit FailingSource(Bytes data) : data_(std::move(data)) {}
  Result<size_t> Read(std::span<uint8_t> out) override {
    if (pos_ == data_.size()) return Status::IoError("disk on fire");
    size_t n = std::min(out.size(), data_.size() - pos_);
    std::memcpy(out.data(), data_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  std::string Describe() const override { return "failing"; }

 private:
  Bytes data_;
  size_t pos_ = 0;
};

TEST(KfdImageCorruptionTest, ReadErrorsKeepTheirCodeAndNameTheImage) {
  Bytes image = WithHeader(KfdBytes());
  criu::CriuKfd kfd;
  for (size_t cut : {size_t{0}, size_t{4}, size_t{8}, size_t{100}, image.size()}) {
    FailingSource source(Bytes(image.begin(), image.begin() + cut));
    Status s = ReadImage(source, &kfd, kName);
    EXPECT_EQ(s.code(), Status::Code::kIoError) << cut << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(kName));
    EXPECT_THAT(s.message(), HasSubstr("disk on fire"));
  }
}

TEST(KfdImageCorruptionTest, WriterRefusesMissingRequiredFields) {
  criu::CriuKfd kfd = MakeKfd();
  kfd.mutable_bo_entries(0)->clear_handle();
  MemorySink sink;
  Status s = WriteImage(sink, kfd);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("bo_entries[0].handle"));
  EXPECT_TRUE(sink.bytes().empty());
}

// ---- Names ----

TEST(KfdImageNameTest, MatchesUpstreamFormats) {
  EXPECT_EQ(KfdImageName(234), "amdgpu-kfd-234.img");
  EXPECT_EQ(PagesImageName(7, 0x1a2b), "amdgpu-pages-7-1a2b.img");
  EXPECT_EQ(PagesImageName(7, 0xbeef0), "amdgpu-pages-7-beef0.img");  // %04x pads, never truncates
  EXPECT_EQ(PagesImageName(7, 0x2a), "amdgpu-pages-7-002a.img");
  EXPECT_EQ(PagesImageName(0, 0xdeadbeef), "amdgpu-pages-0-deadbeef.img");
  EXPECT_EQ(VramStreamName(7, 0x1a2b), "amdgpu-vram-7-1a2b.img");
  EXPECT_EQ(VramStreamName(7, 0xbeef0), "amdgpu-vram-7-beef0.img");
  EXPECT_EQ(RenderImageName(12), "amdgpu-renderD-12.img");
  EXPECT_EQ(DmabufImageName(12), "amdgpu-dmabuf_12.img");
  EXPECT_EQ(DrmPagesImageName(12, 128, 0x1f), "amdgpu-drm-pages-12-128-001f.img");
}

}  // namespace
}  // namespace vramflow
