// SPDX-License-Identifier: MIT
// Moves CRIU's listening TCP sockets to other ports: rewrites a checkpoint's
// files.img so that every inet socket (AF_INET or AF_INET6, IPPROTO_TCP) in
// TCP_LISTEN state bound to port OLD is bound to NEW after the restore.
//
// This is criu-image-streamer's `serve --tcp-listen-remap OLD:NEW,...`: a
// restored server can listen on another port than the one it was dumped
// with (two copies of one checkpoint on one host, a port taken on the
// destination). `vramflow streamer serve` applies it to files.img before
// handing the file to CRIU.
//
// files.img is CRIU's image format: two u32 magics (IMG_COMMON_MAGIC,
// FILES_MAGIC), then entries, each a u32 size and a protobuf `file_entry`
// (CRIU's images/fdinfo.proto) whose field 4 is an `inet_sk_entry`
// (images/sk-inet.proto). The rewrite works on the protobuf wire format:
// only the entries of remapped sockets are re-encoded (their src_port and
// the lengths around it); every other byte is copied as it is, so an image
// with nothing to remap comes back byte for byte. The input is untrusted:
// every length is bounds-checked, and an error names the entry and the
// byte offset in files.img.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"

namespace vramflow {

// OLD -> NEW pairs, as --tcp-listen-remap gives them.
using TcpPortRemap = std::vector<std::pair<uint16_t, uint16_t>>;

struct TcpListenRemapResult {
  std::vector<uint8_t> files_img;      // the rewritten image
  std::vector<uint16_t> listen_ports;  // every listening TCP socket's port as dumped, in image order
  size_t sockets_remapped = 0;         // how many sockets were moved (one port may have several: v4 and v6)
};

// Rewrites `files_img` (the whole file) as above. Every socket listening on
// an OLD port is moved, not only the first. Errors: InvalidArgument when
// `remap` names one OLD port twice, or when an OLD port has no listening
// TCP socket in the image (the message lists the ports missing and the
// ports found, as criu-image-streamer does); Corruption or Truncated when
// the bytes do not follow CRIU's format.
Result<TcpListenRemapResult> RemapTcpListenPorts(std::span<const uint8_t> files_img, const TcpPortRemap& remap);

}  // namespace vramflow
