// SPDX-License-Identifier: MIT
// CRIU amdgpu plugin image files: names, and the size-prefixed protobuf
// framing of the metadata images.
//
// Upstream's plugin (plugins/amdgpu/amdgpu_plugin_util.c: open_img_file,
// write_img_file, read_file) stores each metadata image as
//
//   offset 0  8 bytes  content size N: a native-endian size_t
//   offset 8  N bytes  the packed protobuf (plugin/criu_amdgpu.proto)
//
// and nothing after it. The size exists because an image streamer can
// neither stat nor seek. vramflow writes and reads the size little-endian
// (common/endian.h), which is upstream's native order on every host KFD runs
// on (x86-64, aarch64); a big-endian upstream image is rejected as an
// oversized content size, never misread.
//
// BO contents are not protobuf: upstream keeps them in raw amdgpu-pages files
// (streamer/format/amdgpu_pages.h), vramflow in its chunk streams (VramStreamName).
//
// Stateless functions; safe to call from any thread on distinct sinks,
// sources and messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/core/byte_stream.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace vramflow {

// The content-size prefix: one 64-bit integer.
inline constexpr size_t kImageSizeHeaderBytes = 8;
// The largest protobuf body we write or read. Upstream's largest is
// priv_data, about 80 KB for a real process (CRIU issue #2663); the limit
// only stops a corrupt size from asking for absurd memory. Protobuf itself
// cannot parse more than 2 GiB.
inline constexpr uint64_t kMaxImageContentSize = uint64_t{1} << 30;

// The image bytes for `msg`: the 8-byte size, then the packed message.
// InvalidArgument if a required field is unset (upstream's protobuf-c unpack
// would reject the image) or the message exceeds kMaxImageContentSize;
// `what` names the image in the message.
Result<std::vector<uint8_t>> EncodeImage(const google::protobuf::MessageLite& msg, const std::string& what);

// Writes EncodeImage(msg) to `sink` in one Write(). Does not Commit(): the
// caller owns the sink and commits it once the image is complete.
Status WriteImage(ByteSink& sink, const google::protobuf::MessageLite& msg);

// Reads one whole image from `source`, to its end, into *msg (cleared
// first). `what` names the image in errors, e.g. "amdgpu-kfd-234.img".
// Errors name `what` and the byte offset:
//   Truncated   the input ends inside the size header or the body;
//   Corruption  the size exceeds kMaxImageContentSize, bytes follow the body,
//               the body is not a valid protobuf, or it lacks a required field;
//   the source's own error, with `what` as context, if a read fails.
// The body is read in bounded steps, so a corrupt size costs no more memory
// than the input actually holds.
Status ReadImage(ByteSource& source, google::protobuf::MessageLite* msg, const std::string& what);

// ReadImage over bytes already in memory.
Status DecodeImage(std::span<const uint8_t> image, google::protobuf::MessageLite* msg, const std::string& what);

// Image file names, exactly as upstream formats them. `id` is CRIU's
// external-file id (an int in the plugin hooks, printed with %d); gpu ids are
// printed with %04x: at least four lower-case hex digits, never truncated.
std::string KfdImageName(int id);                     // amdgpu-kfd-<id>.img
std::string PagesImageName(int id, uint32_t gpu_id);  // amdgpu-pages-<id>-<gpu_id>.img
std::string RenderImageName(int id);                  // amdgpu-renderD-<id>.img
std::string DmabufImageName(int id);                  // amdgpu-dmabuf_<id>.img
// One raw file per render-node BO (criu-dev): render minor in decimal, BO
// index in %04x.
std::string DrmPagesImageName(int id, uint32_t render_minor, uint32_t bo_index);
// vramflow's chunk stream of one GPU's BO contents, in place of the pages
// file: amdgpu-vram-<id>-<gpu_id>.img.
std::string VramStreamName(int id, uint32_t gpu_id);

}  // namespace vramflow
