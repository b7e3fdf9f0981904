// SPDX-License-Identifier: MIT
// RemapTcpListenPorts (image_streamer/tcp_remap.h) on files.img images written
// by tests/support/criu_files_img_builder.h: which sockets move, that nothing else
// changes by a byte, and clear errors for bad remaps and hostile bytes.
// Real CRIU dumps and restores: tests/real_criu_tcp_remap_test.cc.
#include "image_streamer/tcp_remap.h"

#include <random>

#include "gtest/gtest.h"
#include "tests/support/criu_files_img_builder.h"

namespace vramflow {
namespace {

using testing::FilesImage;
using testing::InetSocketEntry;
using testing::PbMessage;
using testing::RegularFileEntry;
using testing::TestInetSocket;

TestInetSocket Socket(uint32_t id, uint32_t family, uint32_t proto, uint32_t state, uint32_t port) {
  TestInetSocket s;
  s.id = id;
  s.family = family;
  s.type = proto == 6 ? 1 : 2;
  s.proto = proto;
  s.state = state;
  s.src_port = port;
  return s;
}

// Port 8080 four times: listening on v4 and on v6, an established TCP
// socket and a UDP socket; a listener on 9000; a regular file.
std::vector<PbMessage> MixedEntries(uint32_t listen_8080_becomes = 8080) {
  return {RegularFileEntry(1, "/usr/lib/python3.11/os.py"),
          InetSocketEntry(Socket(2, 2, 6, 10, listen_8080_becomes)),
          InetSocketEntry(Socket(3, 10, 6, 10, listen_8080_becomes)),
          InetSocketEntry(Socket(4, 2, 6, 1, 8080)),   // TCP_ESTABLISHED
          InetSocketEntry(Socket(5, 2, 17, 7, 8080)),  // UDP (TCP_CLOSE)
          InetSocketEntry(Socket(6, 2, 6, 10, 9000))};
}

TEST(CriuTcpRemap, WithoutARemapTheImageComesBackByteForByte) {
  const std::vector<uint8_t> image = FilesImage(MixedEntries());
  auto r = RemapTcpListenPorts(image, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_img, image);
  EXPECT_EQ(r->listen_ports, (std::vector<uint16_t>{8080, 8080, 9000}));
  EXPECT_EQ(r->sockets_remapped, 0u);
}

TEST(CriuTcpRemap, MovesEveryListeningTcpSocketOnThePortAndNothingElse) {
  auto r = RemapTcpListenPorts(FilesImage(MixedEntries()), {{8080, 8081}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The v4 and v6 listeners move; the established and UDP sockets on 8080 and
  // the listener on 9000 do not.
  EXPECT_EQ(r->files_img, FilesImage(MixedEntries(8081)));
  EXPECT_EQ(r->sockets_remapped, 2u);
  EXPECT_EQ(r->listen_ports, (std::vector<uint16_t>{8080, 8080, 9000}));
}

TEST(CriuTcpRemap, LongerAndShorterPortsReencodeTheLengthsAroundThem) {
  // 100 is a one-byte varint, 40000 three bytes: the socket's and the
  // entry's lengths change.
  const std::vector<uint8_t> before = FilesImage(MixedEntries(100));
  auto longer = RemapTcpListenPorts(before, {{100, 40000}, {9000, 9001}});
  ASSERT_TRUE(longer.ok()) << longer.status().ToString();
  std::vector<PbMessage> expected = MixedEntries(40000);
  expected[5] = InetSocketEntry(Socket(6, 2, 6, 10, 9001));
  EXPECT_EQ(longer->files_img, FilesImage(expected));
  EXPECT_EQ(longer->files_img.size(), before.size() + 2 * 2);
  auto back = RemapTcpListenPorts(longer->files_img, {{40000, 100}, {9001, 9000}});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->files_img, before);
}

TEST(CriuTcpRemap, APortWithNoListenerIsAnErrorNamingIt) {
  // 8080 has sockets, but not one listening TCP socket among those asked.
  auto r = RemapTcpListenPorts(
      FilesImage({InetSocketEntry(Socket(4, 2, 6, 1, 8080)), InetSocketEntry(Socket(5, 2, 17, 7, 8080)),
                  InetSocketEntry(Socket(6, 2, 6, 10, 9000))}),
      {{9000, 9001}, {8080, 8081}, {7, 8}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no listening TCP socket on port 7, 8080 in files.img"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("its listening TCP ports: 9000"), std::string::npos) << r.status().message();
  auto none = RemapTcpListenPorts(FilesImage({RegularFileEntry(1, "/a")}), {{1, 2}});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("(its listening TCP ports: none)"), std::string::npos);
}

TEST(CriuTcpRemap, OnePortRemappedTwiceIsRefused) {
  auto r = RemapTcpListenPorts(FilesImage(MixedEntries()), {{8080, 1}, {8080, 2}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("port 8080 is remapped twice"), std::string::npos) << r.status().message();
}

TEST(CriuTcpRemap, AnEmptyImageAndOtherImagesAreTold) {
  EXPECT_TRUE(RemapTcpListenPorts(FilesImage({}), {}).ok());
  auto short_header = RemapTcpListenPorts(std::vector<uint8_t>{0x19, 0x43, 0x56}, {});
  ASSERT_FALSE(short_header.ok());
  EXPECT_EQ(short_header.status().code(), Status::Code::kTruncated);
  std::vector<uint8_t> image = FilesImage({});
  image[0] ^= 1;
  auto not_criu = RemapTcpListenPorts(image, {});
  ASSERT_FALSE(not_criu.ok());
  EXPECT_NE(not_criu.status().message().find("at offset 0 is not CRIU's image magic 0x54564319"), std::string::npos)
      << not_criu.status().message();
  image = FilesImage({});
  image[4] = 0x16;  // another image's magic
  auto other = RemapTcpListenPorts(image, {});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("at offset 4 is not files.img's 0x56303138"), std::string::npos)
      << other.status().message();
}

// Every cut of a valid image either ends at an entry boundary (and parses)
// or is reported as truncated, with the entry and offset.
TEST(CriuTcpRemap, EveryTruncationIsCleanlyReported) {
  const std::vector<uint8_t> image = FilesImage(MixedEntries());
  std::vector<size_t> boundaries{8};
  for (size_t pos = 8; pos < image.size();) {
    const uint32_t size = image[pos] | image[pos + 1] << 8 | image[pos + 2] << 16 | uint32_t(image[pos + 3]) << 24;
    pos += 4 + size;
    boundaries.push_back(pos);
  }
  for (size_t n = 0; n < image.size(); ++n) {
    auto r = RemapTcpListenPorts(std::span<const uint8_t>(image.data(), n), {});
    const bool boundary = std::find(boundaries.begin(), boundaries.end(), n) != boundaries.end();
    ASSERT_EQ(r.ok(), boundary) << "cut at " << n << ": " << r.status().ToString();
    if (!boundary) {
      EXPECT_EQ(r.status().code(), Status::Code::kTruncated) << n;
    }
  }
  auto r = RemapTcpListenPorts(std::span<const uint8_t>(image.data(), image.size() - 1), {});
  EXPECT_NE(r.status().message().find("files.img entry 5 at offset "), std::string::npos) << r.status().message();
}

// An entry whose bytes are wrapped in a valid size but whose protobuf is not.
std::vector<uint8_t> ImageOfOneEntry(const std::vector<uint8_t>& entry) {
  std::vector<uint8_t> image = FilesImage({});
  for (int i = 0; i < 4; ++i) image.push_back(static_cast<uint8_t>(entry.size() >> (8 * i)));
  image.insert(image.end(), entry.begin(), entry.end());
  return image;
}

TEST(CriuTcpRemap, HostileProtobufIsACorruptionWithTheOffset) {
  struct Case {
    const char* name;
    std::vector<uint8_t> entry;
    const char* expected;
  };
  PbMessage port_as_bytes;
  port_as_bytes.Varint(3, 2).Varint(5, 6).Varint(6, 10).Bytes(7, {1, 2});
  PbMessage wrong_port_entry;
  wrong_port_entry.Varint(1, 4).Message(4, port_as_bytes);
  PbMessage isk;
  isk.Varint(3, 2).Varint(5, 6).Varint(6, 10).Varint(7, 80);
  PbMessage two_sockets;
  two_sockets.Varint(1, 4).Message(4, isk).Message(4, isk);
  const std::vector<Case> cases = {
      {"field number 0", {0x00, 0x01}, "entry 0, file entry at offset 12: field number 0 is not valid"},
      {"group", {0x0b, 0x0c}, "field 1 has wire type 3, which CRIU's images do not use"},
      {"overlong varint", {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "overflows 64 bits"},
      {"varint cut", {0x08, 0xff}, "a varint runs past the end"},
      {"length past end", {0x22, 0x05, 0x08}, "field 4 claims 5 bytes, 1 are left"},
      {"fixed32 cut", {0x0d, 1, 2}, "field 1 runs past the end"},
      {"type as bytes", {0x0a, 0x00}, "type (field 1) has wire type 2"},
      {"isk as varint", {0x20, 0x01}, "isk (field 4) has wire type 0"},
      {"src_port as bytes", wrong_port_entry.bytes(), "inet socket at offset 22: src_port (field 7) has wire type 2"},
      {"two sockets", two_sockets.bytes(), "a second inet socket (field 4) in one entry"},
  };
  for (const Case& c : cases) {
    auto r = RemapTcpListenPorts(ImageOfOneEntry(c.entry), {{80, 81}});
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.status().code(), Status::Code::kInvalidArgument) << c.name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << c.name << ": " << r.status().message();
  }
}

// Fields CRIU's schema does not name, in any wire type, are carried over.
TEST(CriuTcpRemap, UnknownFieldsAreKept) {
  PbMessage isk;
  isk.Varint(3, 10).Varint(5, 6).Varint(6, 10).Varint(7, 443).Varint(99, 5).String(100, "future");
  PbMessage entry;
  entry.Varint(1, 4).Message(4, isk).String(77, "later field");
  PbMessage moved_isk;
  moved_isk.Varint(3, 10).Varint(5, 6).Varint(6, 10).Varint(7, 8443).Varint(99, 5).String(100, "future");
  PbMessage moved;
  moved.Varint(1, 4).Message(4, moved_isk).String(77, "later field");
  auto r = RemapTcpListenPorts(FilesImage({entry}), {{443, 8443}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_img, FilesImage({moved}));
}

// Random damage never crashes or reads out of bounds (the ASan build checks
// the latter); what parses keeps its size within a few bytes per socket.
TEST(CriuTcpRemap, RandomDamageIsHandled) {
  const std::vector<uint8_t> image = FilesImage(MixedEntries());
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> damaged = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i)
      damaged[8 + rng() % (damaged.size() - 8)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto r = RemapTcpListenPorts(damaged, {});
    if (r.ok()) {
      EXPECT_EQ(r->files_img, damaged);
    }
  }
}

}  // namespace
}  // namespace vramflow
