// SPDX-License-Identifier: MIT
#include "image_streamer/tcp_remap.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace vramflow {
namespace {

// CRIU's criu/include/magic.h.
constexpr uint32_t kImgCommonMagic = 0x54564319;
constexpr uint32_t kFilesMagic = 0x56303138;

// images/fdinfo.proto: file_entry.type (fd_types) and file_entry.isk.
constexpr uint32_t kFileEntryTypeField = 1;
constexpr uint32_t kFileEntryIskField = 4;
constexpr uint64_t kFdTypeInetSk = 4;  // INETSK
// images/sk-inet.proto: inet_sk_entry's fields.
constexpr uint32_t kIskFamilyField = 3;
constexpr uint32_t kIskProtoField = 5;
constexpr uint32_t kIskStateField = 6;
constexpr uint32_t kIskSrcPortField = 7;
// Linux's values of those fields.
constexpr uint64_t kAfInet = 2;
constexpr uint64_t kAfInet6 = 10;
constexpr uint64_t kIpProtoTcp = 6;
constexpr uint64_t kTcpListen = 10;

enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// One protobuf field, by absolute offsets in files.img: the tag starts at
// `start` and ends at `tag_end`, the value (after a length prefix, for
// length-delimited fields) starts at `value_start`, and the field ends at
// `end`.
struct WireField {
  uint32_t number = 0;
  uint8_t wire_type = 0;
  uint64_t varint = 0;  // the value of a varint field
  size_t start = 0;
  size_t tag_end = 0;
  size_t value_start = 0;
  size_t end = 0;
};

// Walks the fields of one protobuf message held in bytes [pos, end) of
// files.img. Errors say which entry and offset; `what` names the message.
class WireReader {
 public:
  WireReader(std::span<const uint8_t> image, size_t pos, size_t end, size_t entry, const char* what)
      : image_(image), pos_(pos), end_(end), entry_(entry), what_(what) {}

  // The next field, or nullopt at the message's end.
  Result<std::optional<WireField>> Next() {
    if (pos_ == end_) return std::optional<WireField>();
    WireField f;
    f.start = pos_;
    VF_ASSIGN_OR_RETURN(uint64_t tag, Varint());
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire_type = static_cast<uint8_t>(tag & 7);
    f.tag_end = pos_;
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
      return Error(f.start, "field number " + std::to_string(tag >> 3) + " is not valid");
    switch (f.wire_type) {
      case kVarint: {
        f.value_start = pos_;
        VF_ASSIGN_OR_RETURN(f.varint, Varint());
        break;
      }
      case kFixed64:
      case kFixed32: {
        const size_t n = f.wire_type == kFixed64 ? 8 : 4;
        if (end_ - pos_ < n) return Error(pos_, "field " + std::to_string(f.number) + " runs past the end", true);
        f.value_start = pos_;
        pos_ += n;
        break;
      }
      case kLengthDelimited: {
        VF_ASSIGN_OR_RETURN(uint64_t length, Varint());
        if (length > end_ - pos_)
          return Error(pos_,
                       "field " + std::to_string(f.number) + " claims " + std::to_string(length) + " bytes, " +
                           std::to_string(end_ - pos_) + " are left",
                       true);
        f.value_start = pos_;
        pos_ += static_cast<size_t>(length);
        break;
      }
      default:
        return Error(f.start, "field " + std::to_string(f.number) + " has wire type " + std::to_string(f.wire_type) +
                                  ", which CRIU's images do not use");
    }
    f.end = pos_;
    return std::optional<WireField>(f);
  }

  // A field of the wrong wire type where the schema says otherwise.
  Status WrongType(const WireField& f, const char* name) const {
    return Error(f.start, std::string(name) + " (field " + std::to_string(f.number) + ") has wire type " +
                              std::to_string(f.wire_type));
  }

 private:
  Result<uint64_t> Varint() {
    const size_t start = pos_;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ == end_) return Error(start, "a varint runs past the end", true);
      const uint8_t byte = image_[pos_++];
      if (shift == 63 && byte > 1) return Error(start, "a varint overflows 64 bits");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Error(start, "a varint is longer than 10 bytes");
  }

  Status Error(size_t offset, const std::string& msg, bool truncated = false) const {
    const std::string full = "files.img entry " + std::to_string(entry_) + ", " + what_ + " at offset " +
                             std::to_string(offset) + ": " + msg;
    return truncated ? Status::Truncated(full) : Status::Corruption(full);
  }

  std::span<const uint8_t> image_;
  size_t pos_;
  size_t end_;
  size_t entry_;
  const char* what_;
};

void AppendVarint(std::vector<uint8_t>* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<uint8_t>(v));
}

void AppendBytes(std::vector<uint8_t>* out, std::span<const uint8_t> image, size_t from, size_t to) {
  out->insert(out->end(), image.begin() + static_cast<std::ptrdiff_t>(from),
              image.begin() + static_cast<std::ptrdiff_t>(to));
}

void AppendU32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t LoadU32(std::span<const uint8_t> image, size_t pos) {
  return static_cast<uint32_t>(image[pos]) | static_cast<uint32_t>(image[pos + 1]) << 8 |
         static_cast<uint32_t>(image[pos + 2]) << 16 | static_cast<uint32_t>(image[pos + 3]) << 24;
}

// What an inet_sk_entry says about the socket (the last value of a field
// wins, as protobuf decoders do).
struct InetSocket {
  std::optional<uint64_t> family, proto, state, src_port;
  bool tcp_listen() const {
    return proto == kIpProtoTcp && state == kTcpListen && (family == kAfInet || family == kAfInet6) && src_port;
  }
};

Result<InetSocket> ReadInetSocket(std::span<const uint8_t> image, const WireField& isk, size_t entry) {
  InetSocket socket;
  WireReader reader(image, isk.value_start, isk.end, entry, "inet socket");
  while (true) {
    VF_ASSIGN_OR_RETURN(std::optional<WireField> f, reader.Next());
    if (!f) break;
    std::optional<uint64_t>* slot = nullptr;
    const char* name = "";
    switch (f->number) {
      case kIskFamilyField:
        slot = &socket.family;
        name = "family";
        break;
      case kIskProtoField:
        slot = &socket.proto;
        name = "proto";
        break;
      case kIskStateField:
        slot = &socket.state;
        name = "state";
        break;
      case kIskSrcPortField:
        slot = &socket.src_port;
        name = "src_port";
        break;
      default:
        continue;
    }
    if (f->wire_type != kVarint) return reader.WrongType(*f, name);
    *slot = f->varint & 0xffffffffu;  // uint32 fields: decoders keep the low 32 bits
  }
  return socket;
}

// The inet_sk_entry's bytes with every src_port set to `port`.
std::vector<uint8_t> RewriteInetSocket(std::span<const uint8_t> image, const WireField& isk, size_t entry,
                                       uint16_t port) {
  std::vector<uint8_t> out;
  out.reserve(isk.end - isk.value_start + 3);
  WireReader reader(image, isk.value_start, isk.end, entry, "inet socket");
  // ReadInetSocket has walked these bytes already: Next() cannot fail.
  while (true) {
    Result<std::optional<WireField>> f = reader.Next();
    if (!f.ok() || !*f) break;
    const WireField& field = **f;
    if (field.number == kIskSrcPortField) {
      AppendBytes(&out, image, field.start, field.tag_end);  // the tag as it was
      AppendVarint(&out, port);
    } else {
      AppendBytes(&out, image, field.start, field.end);
    }
  }
  return out;
}

}  // namespace

Result<TcpListenRemapResult> RemapTcpListenPorts(std::span<const uint8_t> image, const TcpPortRemap& remap) {
  std::map<uint16_t, uint16_t> new_port;
  for (const auto& [from, to] : remap) {
    if (!new_port.emplace(from, to).second)
      return Status::InvalidArgument("--tcp-listen-remap: port " + std::to_string(from) + " is remapped twice");
  }
  std::map<uint16_t, bool> found;  // OLD port -> a socket listened on it
  for (const auto& [from, to] : new_port) found[from] = false;

  if (image.size() < 8)
    return Status::Truncated("files.img: " + std::to_string(image.size()) + " bytes, shorter than its 8-byte header");
  if (LoadU32(image, 0) != kImgCommonMagic)
    return Status::Corruption("files.img: magic " + Hex(LoadU32(image, 0)) + " at offset 0 is not CRIU's image magic " +
                              Hex(kImgCommonMagic));
  if (LoadU32(image, 4) != kFilesMagic)
    return Status::Corruption("files.img: magic " + Hex(LoadU32(image, 4)) + " at offset 4 is not files.img's " +
                              Hex(kFilesMagic) + " (another CRIU image?)");

  TcpListenRemapResult result;
  result.files_img.assign(image.begin(), image.begin() + 8);  // the magics
  result.files_img.reserve(image.size() + 64);
  size_t pos = 8;
  for (size_t entry = 0; pos < image.size(); ++entry) {
    if (image.size() - pos < 4)
      return Status::Truncated("files.img entry " + std::to_string(entry) + " at offset " + std::to_string(pos) +
                               ": its size field is cut short (" + std::to_string(image.size() - pos) + " bytes left)");
    const uint32_t size = LoadU32(image, pos);
    const size_t begin = pos + 4;
    if (size > image.size() - begin)
      return Status::Truncated("files.img entry " + std::to_string(entry) + " at offset " + std::to_string(pos) +
                               ": claims " + std::to_string(size) + " bytes, " + std::to_string(image.size() - begin) +
                               " are left");
    const size_t end = begin + size;

    uint64_t type = 0;
    std::optional<WireField> isk;
    WireReader reader(image, begin, end, entry, "file entry");
    while (true) {
      VF_ASSIGN_OR_RETURN(std::optional<WireField> f, reader.Next());
      if (!f) break;
      if (f->number == kFileEntryTypeField) {
        if (f->wire_type != kVarint) return reader.WrongType(*f, "type");
        type = f->varint & 0xffffffffu;  // an enum: decoders keep the low 32 bits
      } else if (f->number == kFileEntryIskField) {
        if (f->wire_type != kLengthDelimited) return reader.WrongType(*f, "isk");
        // Decoders merge a repeated sub-message; CRIU never writes one twice.
        if (isk)
          return Status::Corruption("files.img entry " + std::to_string(entry) + " at offset " +
                                    std::to_string(f->start) + ": a second inet socket (field 4) in one entry");
        isk = f;
      }
    }

    std::optional<uint16_t> move_to;
    if (type == kFdTypeInetSk && isk) {
      VF_ASSIGN_OR_RETURN(InetSocket socket, ReadInetSocket(image, *isk, entry));
      if (socket.tcp_listen() && *socket.src_port <= 0xffff) {
        const uint16_t port = static_cast<uint16_t>(*socket.src_port);
        result.listen_ports.push_back(port);
        if (auto it = new_port.find(port); it != new_port.end()) {
          move_to = it->second;
          found[port] = true;
        }
      }
    }
    if (!move_to) {
      AppendBytes(&result.files_img, image, pos, end);
    } else {
      const std::vector<uint8_t> socket = RewriteInetSocket(image, *isk, entry, *move_to);
      std::vector<uint8_t> body;
      body.reserve(size + 8);
      AppendBytes(&body, image, begin, isk->start);
      AppendBytes(&body, image, isk->start, isk->tag_end);  // field 4's tag as it was
      AppendVarint(&body, socket.size());
      body.insert(body.end(), socket.begin(), socket.end());
      AppendBytes(&body, image, isk->end, end);
      if (body.size() > UINT32_MAX)
        return Status::Corruption("files.img entry " + std::to_string(entry) + ": too large once rewritten");
      AppendU32(&result.files_img, static_cast<uint32_t>(body.size()));
      result.files_img.insert(result.files_img.end(), body.begin(), body.end());
      ++result.sockets_remapped;
    }
    pos = end;
  }

  std::string missing;
  for (const auto& [port, was_found] : found)
    if (!was_found) missing += (missing.empty() ? "" : ", ") + std::to_string(port);
  if (!missing.empty()) {
    std::vector<uint16_t> ports = result.listen_ports;
    std::sort(ports.begin(), ports.end());
    ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
    std::string listening;
    for (uint16_t p : ports) listening += (listening.empty() ? "" : ", ") + std::to_string(p);
    return Status::InvalidArgument(
        "--tcp-listen-remap: no listening TCP socket on port " + missing +
        " in files.img (its listening TCP ports: " + (listening.empty() ? "none" : listening) + ")");
  }
  return result;
}

}  // namespace vramflow
