// SPDX-License-Identifier: MIT
// Writes CRIU files.img images for tests (tests/criu_tcp_remap_test.cc and
// the fuzz target's seeds): the two magics, then u32 sizes and protobuf
// file_entry messages, encoded field by field as CRIU's protobuf-c does
// (ascending field numbers, shortest varints). Only the fields the tests
// need; independent of image_streamer/tcp_remap.cc's parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vramflow::testing {

// One protobuf message, built field by field.
class PbMessage {
 public:
  PbMessage& Varint(uint32_t field, uint64_t value) {
    PutVarint(static_cast<uint64_t>(field) << 3 | 0);
    PutVarint(value);
    return *this;
  }
  PbMessage& Bytes(uint32_t field, const std::vector<uint8_t>& bytes) {
    PutVarint(static_cast<uint64_t>(field) << 3 | 2);
    PutVarint(bytes.size());
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  PbMessage& String(uint32_t field, const std::string& s) {
    return Bytes(field, std::vector<uint8_t>(s.begin(), s.end()));
  }
  PbMessage& Message(uint32_t field, const PbMessage& m) { return Bytes(field, m.bytes()); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<uint8_t>(v));
  }
  std::vector<uint8_t> bytes_;
};

// What an inet socket entry holds (images/sk-inet.proto), as CRIU fills it.
struct TestInetSocket {
  uint32_t id = 1;
  uint32_t family = 2;  // AF_INET; 10 is AF_INET6
  uint32_t type = 1;    // SOCK_STREAM
  uint32_t proto = 6;   // IPPROTO_TCP
  uint32_t state = 10;  // TCP_LISTEN
  uint32_t src_port = 8080;
  uint32_t dst_port = 0;
};

// A file_entry of type INETSK (4) holding `s`.
inline PbMessage InetSocketEntry(const TestInetSocket& s) {
  PbMessage fown;
  fown.Varint(1, 0).Varint(2, 0).Varint(3, 0).Varint(4, 0).Varint(5, 0);
  PbMessage opts;
  opts.Varint(1, 212992).Varint(2, 212992).Varint(3, 0).Varint(4, 0).Varint(5, 0).Varint(6, 0);
  PbMessage isk;
  isk.Varint(1, s.id).Varint(2, 4000000 + s.id).Varint(3, s.family).Varint(4, s.type).Varint(5, s.proto);
  isk.Varint(6, s.state).Varint(7, s.src_port).Varint(8, s.dst_port).Varint(9, 2).Varint(10, 128);
  const int addr_words = s.family == 10 ? 4 : 1;
  for (int i = 0; i < addr_words; ++i) isk.Varint(11, i + 1 == addr_words ? 0x0100007f : 0);
  for (int i = 0; i < addr_words; ++i) isk.Varint(12, 0);
  isk.Message(13, fown).Message(14, opts);
  if (s.family == 10) isk.Varint(15, 1);
  PbMessage entry;
  entry.Varint(1, 4).Varint(2, s.id).Message(4, isk);
  return entry;
}

// A file_entry of type REG (1) for `path`.
inline PbMessage RegularFileEntry(uint32_t id, const std::string& path) {
  PbMessage fown;
  fown.Varint(1, 0).Varint(2, 0).Varint(3, 0).Varint(4, 0).Varint(5, 0);
  PbMessage reg;
  reg.Varint(1, id).Varint(2, 0100000).Varint(3, 0).Message(5, fown).String(6, path).Varint(8, 0x100);
  PbMessage entry;
  entry.Varint(1, 1).Varint(2, id).Message(3, reg);
  return entry;
}

// files.img: IMG_COMMON_MAGIC, FILES_MAGIC, then each entry with its u32 size.
inline std::vector<uint8_t> FilesImage(const std::vector<PbMessage>& entries) {
  std::vector<uint8_t> out;
  auto put32 = [&out](uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put32(0x54564319);
  put32(0x56303138);
  for (const PbMessage& e : entries) {
    put32(static_cast<uint32_t>(e.bytes().size()));
    out.insert(out.end(), e.bytes().begin(), e.bytes().end());
  }
  return out;
}

}  // namespace vramflow::testing
