// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted files.img bytes through --tcp-listen-remap's
// rewrite (image_streamer/tcp_remap.h), what `streamer serve` does to a
// checkpoint it did not write.
//
// The input's first 4 bytes are a remap OLD:NEW (two little-endian u16),
// the rest is the image. Promises checked:
//   1. without a remap, an accepted image comes back byte for byte;
//   2. with the remap, an accepted result is itself an image the parser
//      accepts, with as many listening sockets, at most twice as long plus
//      8 bytes per socket moved (each src_port field takes at least 2 bytes
//      and at most 4 once rewritten; lengths grow by at most 2 bytes), and
//      NEW:OLD over it finds NEW.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR the binary writes images with
// listening v4 and v6 sockets, other sockets and a regular file into DIR
// and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "image_streamer/tcp_remap.h"
#include "tests/support/criu_files_img_builder.h"

namespace vramflow {
namespace {

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "criu_files_img_fuzz: broken promise: %s\n", what);
  std::abort();
}

void WriteSeed(const std::string& path, uint16_t from, uint16_t to, const std::vector<uint8_t>& image) {
  std::ofstream out(path, std::ios::binary);
  const uint8_t head[4] = {static_cast<uint8_t>(from), static_cast<uint8_t>(from >> 8), static_cast<uint8_t>(to),
                           static_cast<uint8_t>(to >> 8)};
  out.write(reinterpret_cast<const char*>(head), 4);
  out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
}

void WriteSeeds(const std::string& dir) {
  using namespace testing;
  auto socket = [](uint32_t id, uint32_t family, uint32_t proto, uint32_t state, uint32_t port) {
    TestInetSocket s;
    s.id = id;
    s.family = family;
    s.proto = proto;
    s.type = proto == 6 ? 1 : 2;
    s.state = state;
    s.src_port = port;
    return InetSocketEntry(s);
  };
  const std::vector<uint8_t> mixed =
      FilesImage({RegularFileEntry(1, "/usr/bin/python3"), socket(2, 2, 6, 10, 8080), socket(3, 10, 6, 10, 8080),
                  socket(4, 2, 6, 1, 8080), socket(5, 2, 17, 7, 53), socket(6, 2, 6, 10, 100)});
  WriteSeed(dir + "/mixed", 8080, 40000, mixed);
  WriteSeed(dir + "/short-port", 100, 65535, mixed);
  WriteSeed(dir + "/none", 0, 0, FilesImage({RegularFileEntry(7, "/tmp/x")}));
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
  if (size < 4) return 0;
  const uint16_t from = static_cast<uint16_t>(data[0] | data[1] << 8);
  const uint16_t to = static_cast<uint16_t>(data[2] | data[3] << 8);
  std::span<const uint8_t> image(data + 4, size - 4);

  Result<TcpListenRemapResult> plain = RemapTcpListenPorts(image, {});
  if (!plain.ok()) return 0;
  if (!std::equal(plain->files_img.begin(), plain->files_img.end(), image.begin(), image.end()))
    Broken("without a remap the image changed");

  Result<TcpListenRemapResult> moved = RemapTcpListenPorts(image, {{from, to}});
  if (!moved.ok()) return 0;
  if (moved->files_img.size() > 2 * image.size() + 8 * moved->sockets_remapped) Broken("the image grew too much");
  Result<TcpListenRemapResult> again = RemapTcpListenPorts(moved->files_img, {});
  if (!again.ok()) Broken("the rewritten image does not parse");
  if (again->listen_ports.size() != plain->listen_ports.size()) Broken("the rewrite lost or made a listening socket");
  if (!RemapTcpListenPorts(moved->files_img, {{to, from}}).ok()) Broken("NEW is not found after OLD:NEW");
  return 0;
}
