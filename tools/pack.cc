#include "tools/pack.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>

#include "streamer/amdgpu_pages.h"
#include "streamer/stream_writer.h"
#include "tools/cli_util.h"
#include "transport/fd_stream.h"

namespace vramflow {
namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct Input {
  std::string path;
  std::string name;
  std::unique_ptr<ByteSource> source;
  uint64_t size = 0;    // content bytes (after a legacy header)
  bool size_known = false;
  bool legacy = false;
};

// Opens an input; recognises a legacy amdgpu-pages image by its name and a
// header that matches the file size, and then consumes that header.
Result<Input> OpenInput(const std::string& path, const std::string& stdin_name) {
  Input in;
  in.path = path;
  in.name = path == "-" ? stdin_name : BaseName(path);
  if (in.name.empty()) return Status::InvalidArgument("input '" + path + "' has no file name");
  VF_ASSIGN_OR_RETURN(in.source, OpenSourceSpec(path));
  struct stat st;
  if (path != "-" && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    in.size = static_cast<uint64_t>(st.st_size);
    in.size_known = true;
  }
  if (in.size_known && IsAmdgpuPagesFileName(in.name) && in.size >= kAmdgpuPagesHeaderSize) {
    uint8_t header[kAmdgpuPagesHeaderSize];
    VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*in.source, header));
    if (n != sizeof(header)) return Status::Truncated("'" + path + "' shrank while being read");
    if (DecodeAmdgpuPagesHeader(header, HostIsLittleEndian()) == in.size - kAmdgpuPagesHeaderSize) {
      in.legacy = true;
      in.size -= kAmdgpuPagesHeaderSize;
    } else {
      // Not a well-formed legacy image: pack it as a plain file, from byte 0.
      VF_ASSIGN_OR_RETURN(in.source, OpenSourceSpec(path));
    }
  }
  return in;
}

// Packs one input. Regular files declare their size up front and must not
// change while read; pipes declare kUnknownObjectSize and end at EOF.
Status PackInput(Input& in, StreamWriter& writer, ChunkEncoder& encoder, uint32_t chunk_size,
                 std::vector<uint8_t>& buf) {
  ObjectMetadata meta;
  meta.name = in.name;
  if (in.legacy) {
    meta.attributes.emplace_back(kLegacyFormatKey, kLegacyFormatAmdgpuPages);
    meta.attributes.emplace_back(kLegacyByteOrderKey, HostIsLittleEndian() ? "le" : "be");
  }
  VF_ASSIGN_OR_RETURN(uint32_t id, writer.BeginObject(meta, in.size_known ? in.size : kUnknownObjectSize));
  uint64_t offset = 0;
  EncodedChunk chunk;
  while (!in.size_known || offset < in.size) {
    size_t want = in.size_known ? static_cast<size_t>(std::min<uint64_t>(chunk_size, in.size - offset)) : chunk_size;
    VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*in.source, std::span<uint8_t>(buf.data(), want)));
    if (!in.size_known && n == 0) break;
    if (in.size_known && n != want)
      return Status::Truncated("'" + in.path + "' ended at byte " + std::to_string(offset + n) + " of " +
                               std::to_string(in.size) + " (did it shrink while being packed?)");
    VF_RETURN_IF_ERROR(encoder.Encode(std::span<const uint8_t>(buf.data(), n), &chunk));
    VF_RETURN_IF_ERROR(writer.AddChunk(id, offset, n, chunk));
    offset += n;
  }
  if (in.size_known) {
    uint8_t probe;
    VF_ASSIGN_OR_RETURN(size_t extra, in.source->Read(std::span<uint8_t>(&probe, 1)));
    if (extra != 0) return Status::IoError("'" + in.path + "' grew while being packed");
  }
  in.size = offset;
  return writer.EndObject(id);
}

}  // namespace

Status RunPack(const PackOptions& options, PackReport* report) {
  Stopwatch clock;
  if (options.inputs.empty()) return Status::InvalidArgument("no inputs");
  if (options.chunk_size == 0 || options.chunk_size > kMaxChunkSize)
    return Status::InvalidArgument("chunk size must be 1 byte .. 64 MiB");
  std::map<std::string, std::string> names;
  for (const std::string& path : options.inputs) {
    std::string name = path == "-" ? options.stdin_name : BaseName(path);
    auto [it, inserted] = names.emplace(name, path);
    if (!inserted)
      return Status::InvalidArgument("inputs '" + it->second + "' and '" + path + "' would both be named '" + name + "'");
  }

  FileSinkOptions sink_options;
  sink_options.overwrite = options.force;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSinkSpec(options.output, sink_options));
  StreamHeader header;
  header.chunk_size = options.chunk_size;
  header.zstd_level = static_cast<int8_t>(std::clamp(options.encoder.zstd_level, -128, 127));
  header.producer = ProducerString();
  StreamWriter writer(sink.get(), header);
  ChunkEncoder encoder(options.encoder);
  std::vector<uint8_t> buf(options.chunk_size);
  VF_RETURN_IF_ERROR(writer.Start());

  for (const std::string& path : options.inputs) {
    VF_ASSIGN_OR_RETURN(Input in, OpenInput(path, options.stdin_name));
    Status s = PackInput(in, writer, encoder, options.chunk_size, buf);
    if (!s.ok()) return s.WithContext("packing '" + path + "'");
    ++report->objects;
    report->raw_bytes += in.size;
    report->legacy_images += in.legacy ? 1 : 0;
  }
  VF_RETURN_IF_ERROR(writer.Finish());
  VF_RETURN_IF_ERROR(sink->Commit());
  report->stream_bytes = writer.bytes_written();
  report->seconds = clock.Seconds();
  return Status::Ok();
}

}  // namespace vramflow
