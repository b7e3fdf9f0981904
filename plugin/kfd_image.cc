// SPDX-License-Identifier: MIT
#include "plugin/kfd_image.h"

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <cstdio>

#include "common/endian.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

// The body is read in steps of this size, so memory grows with the bytes
// that actually arrive, not with what a (possibly corrupt) header promises.
constexpr size_t kReadStep = size_t{1} << 20;

std::string At(const std::string& what, uint64_t offset) { return what + " at byte " + std::to_string(offset); }

// snprintf into a string; the names below are at most ~60 characters.
template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char name[96];
  std::snprintf(name, sizeof(name), fmt, args...);
  return name;
}

// Reads the body of `size` bytes that starts at byte kImageSizeHeaderBytes.
Status ReadBody(ByteSource& source, uint64_t size, const std::string& what, std::vector<uint8_t>* body) {
  body->clear();
  while (body->size() < size) {
    size_t old = body->size();
    size_t want = static_cast<size_t>(std::min<uint64_t>(size - old, kReadStep));
    body->resize(old + want);
    auto n = ReadFully(source, std::span<uint8_t>(body->data() + old, want));
    if (!n.ok()) return n.status().WithContext(At(what, kImageSizeHeaderBytes + old));
    if (*n < want)
      return Status::Truncated(At(what, kImageSizeHeaderBytes + old + *n) + ": image ends inside its protobuf body; " +
                               "the size header promises " + std::to_string(size) + " bytes after byte " +
                               std::to_string(kImageSizeHeaderBytes));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<uint8_t>> EncodeImage(const google::protobuf::MessageLite& msg, const std::string& what) {
  // SerializeToArray only checks required fields in debug builds; upstream's
  // unpack always does, so refuse to write what it could not read.
  if (!msg.IsInitialized())
    return Status::InvalidArgument(what + ": " + msg.GetTypeName() +
                                   " is missing required fields: " + msg.InitializationErrorString());
  size_t size = msg.ByteSizeLong();
  if (size > kMaxImageContentSize)
    return Status::InvalidArgument(what + ": " + msg.GetTypeName() + " packs to " + std::to_string(size) +
                                   " bytes, over the " + std::to_string(kMaxImageContentSize) + "-byte image limit");
  std::vector<uint8_t> image(kImageSizeHeaderBytes + size);
  StoreLE64(image.data(), size);
  if (!msg.SerializePartialToArray(image.data() + kImageSizeHeaderBytes, static_cast<int>(size)))
    return Status::Internal(what + ": protobuf failed to serialize " + msg.GetTypeName());
  return image;
}

Status WriteImage(ByteSink& sink, const google::protobuf::MessageLite& msg) {
  VF_ASSIGN_OR_RETURN(std::vector<uint8_t> image, EncodeImage(msg, sink.Describe()));
  return sink.Write(image);
}

Status ReadImage(ByteSource& source, google::protobuf::MessageLite* msg, const std::string& what) {
  msg->Clear();
  uint8_t header[kImageSizeHeaderBytes];
  auto n = ReadFully(source, header);
  if (!n.ok()) return n.status().WithContext(At(what, 0));
  if (*n < kImageSizeHeaderBytes)
    return Status::Truncated(At(what, *n) + ": image ends inside its " + std::to_string(kImageSizeHeaderBytes) +
                             "-byte size header");
  uint64_t size = LoadLE64(header);
  if (size > kMaxImageContentSize)
    return Status::Corruption(At(what, 0) + ": content size " + std::to_string(size) + " exceeds the " +
                              std::to_string(kMaxImageContentSize) + "-byte image limit");

  std::vector<uint8_t> body;
  VF_RETURN_IF_ERROR(ReadBody(source, size, what, &body));
  uint64_t end = kImageSizeHeaderBytes + size;
  uint8_t extra;
  auto more = source.Read(std::span<uint8_t>(&extra, 1));
  if (!more.ok()) return more.status().WithContext(At(what, end));
  if (*more != 0)
    return Status::Corruption(At(what, end) + ": trailing bytes after the protobuf body the size header describes");

  if (!msg->ParsePartialFromArray(body.data(), static_cast<int>(body.size())))
    return Status::Corruption(At(what, kImageSizeHeaderBytes) + ": " + std::to_string(size) +
                              "-byte body is not a valid " + msg->GetTypeName() + " protobuf");
  if (!msg->IsInitialized())
    return Status::Corruption(At(what, kImageSizeHeaderBytes) + ": " + msg->GetTypeName() +
                              " is missing required fields: " + msg->InitializationErrorString());
  return Status::Ok();
}

Status DecodeImage(std::span<const uint8_t> image, google::protobuf::MessageLite* msg, const std::string& what) {
  MemorySource source(image);
  return ReadImage(source, msg, what);
}

std::string KfdImageName(int id) { return Format("amdgpu-kfd-%d.img", id); }
std::string PagesImageName(int id, uint32_t gpu_id) { return Format("amdgpu-pages-%d-%04x.img", id, gpu_id); }
std::string RenderImageName(int id) { return Format("amdgpu-renderD-%d.img", id); }
std::string DmabufImageName(int id) { return Format("amdgpu-dmabuf_%d.img", id); }
std::string DrmPagesImageName(int id, uint32_t render_minor, uint32_t bo_index) {
  return Format("amdgpu-drm-pages-%d-%u-%04x.img", id, render_minor, bo_index);
}
std::string VramStreamName(int id, uint32_t gpu_id) { return Format("amdgpu-vram-%d-%04x.img", id, gpu_id); }

}  // namespace vramflow
