// SPDX-License-Identifier: MIT
#include "tools/pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "common/progress.h"
#include "common/safe_path.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/device/file_device.h"
#include "streamer/format/amdgpu_pages.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline.h"
#include "streamer/pipeline_fit.h"
#include "streamer/sequential_dump.h"
#include "tools/cli/cli_util.h"
#include "tools/planned_file.h"
#include "transport/core/fd_stream.h"
#include "transport/core/uri.h"
#include "transport/open_uri.h"

namespace vramflow {
namespace {

bool IsS3Uri(const std::string& path) { return path.rfind("s3://", 0) == 0; }

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A regular file to pack: the file, the range that becomes the object, and
// whether it is a legacy amdgpu-pages image (whose 8-byte header is left out).
// It is not held open: the device opens it again when it reads it, so pack
// holds a few files open at a time however many it packs.
struct FileInput {
  PlannedFile file;
  std::string name;
  uint64_t base = 0;
  uint64_t size = 0;
  bool legacy = false;
};

// Opens `path` if it is a regular file; returns false in *regular otherwise.
Status OpenRegular(const std::string& path, FileInput* in, bool* regular) {
  *regular = false;
  if (path == "-" || IsS3Uri(path)) return Status::Ok();  // read in order, as a stream
  // A named pipe is not opened here: opening it waits for a writer, and
  // closing it again would leave that writer without a reader.
  struct stat by_path;
  if (::stat(path.c_str(), &by_path) == 0 && S_ISFIFO(by_path.st_mode)) return Status::Ok();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("opening '" + path + "'", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat '" + path + "'", errno);
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument("'" + path + "' is a directory");
  if (!S_ISREG(st.st_mode)) return Status::Ok();
  *regular = true;
  in->file = PlannedFile{path, st.st_dev, st.st_ino};
  in->name = BaseName(path);
  in->size = static_cast<uint64_t>(st.st_size);
  if (IsAmdgpuPagesFileName(in->name) && in->size >= kAmdgpuPagesHeaderSize) {
    uint8_t header[kAmdgpuPagesHeaderSize];
    if (::pread(fd.get(), header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header)) &&
        DecodeAmdgpuPagesHeader(header, HostIsLittleEndian()) == in->size - kAmdgpuPagesHeaderSize) {
      in->legacy = true;  // otherwise: not a well-formed legacy image, packed as a plain file
      in->base = kAmdgpuPagesHeaderSize;
      in->size -= kAmdgpuPagesHeaderSize;
    }
  }
  return Status::Ok();
}

ObjectMetadata MetadataFor(const std::string& name, bool legacy) {
  ObjectMetadata meta;
  meta.name = name;
  if (legacy) {
    meta.attributes.emplace_back(kLegacyFormatKey, kLegacyFormatAmdgpuPages);
    meta.attributes.emplace_back(kLegacyByteOrderKey, HostIsLittleEndian() ? "le" : "be");
  }
  return meta;
}

// What a dump's figures say in the pack's report (either engine).
// (RunPack's clock then gives the seconds: the whole command's.)
void ReportStats(const PipelineStats& stats, PackReport* report) {
  static_cast<StreamFigures&>(*report) = FiguresOf(stats);
  report->writer_seconds = stats.serial_seconds;
  report->threads = stats.threads;
}

// Regular files: the dump graph, with the files as a device.
Status PackFiles(std::vector<FileInput>& inputs, ByteSink* sink, const PipelineOptions& pipeline, PackReport* report) {
  FileDevice device("pack");
  std::vector<DumpSource> sources;
  for (FileInput& in : inputs) {
    DumpSource s;
    s.device = &device;
    FileOpener open = [file = in.file] { return ReopenPlannedFile(file); };
    VF_ASSIGN_OR_RETURN(s.bo, device.ImportFile(std::move(open), in.base, in.size, "'" + in.file.path + "'"));
    s.size = in.size;
    s.metadata = MetadataFor(in.name, in.legacy);
    sources.push_back(std::move(s));
    report->legacy_images += in.legacy ? 1 : 0;
  }
  PipelineStats stats;
  VF_RETURN_IF_ERROR(RunDump(sources, sink, pipeline, &stats));
  // A file that grew while being read would otherwise lose its new tail silently.
  for (const FileInput& in : inputs) VF_RETURN_IF_ERROR(CheckPlannedFileUnchanged(in.file, in.base + in.size));
  ReportStats(stats, report);
  return Status::Ok();
}

// Opens the base of an incremental pack (and the rest of its chain) through
// the same transports as any other stored stream. The chain's indexes must
// fit the pack's memory budget: their sizes are counted from each stream's
// SEEK_INDEX before any chunk record is read, and a chain that does not fit
// is refused then, not after it was held.
Result<std::shared_ptr<const BaseStream>> OpenBase(const PackOptions& options, uint64_t max_index_bytes) {
  const BaseOpenOptions open = CliBaseOpenOptions(options.transport, options.bases, max_index_bytes);
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(options.bases.front(), open);
  if (!base.ok()) return base.status().WithContext("base '" + options.bases.front() + "'");
  if (options.base_refs_only && !(*base)->has_digests())
    return Status::InvalidArgument("base '" + options.bases.front() +
                                   "' has no chunk digests (DIGEST_BLOCKs), which "
                                   "--base-refs-only needs: pack the base with --digests, or leave out "
                                   "--base-refs-only");
  return base;
}

// Streams that are not regular files (stdin, pipes, S3 objects) have no size
// up front and cannot be read at offsets: they are read in order and
// encoded on every thread, as objects of unknown size.
Status PackSequential(const PackOptions& options, ByteSink* sink, const PipelineOptions& pipeline, PackReport* report) {
  std::vector<SequentialInput> inputs;
  for (const std::string& path : options.inputs) {
    SequentialInput in;
    in.metadata = MetadataFor(path == "-" ? options.stdin_name : BaseName(path), false);
    in.open = [&options, path]() -> Result<std::unique_ptr<ByteSource>> {
      return IsS3Uri(path) ? OpenSource(path, options.transport) : OpenSourceSpec(path);
    };
    inputs.push_back(std::move(in));
  }
  PipelineStats stats;
  VF_RETURN_IF_ERROR(RunSequentialDump(inputs, sink, pipeline, &stats));
  ReportStats(stats, report);
  return Status::Ok();
}

}  // namespace

Status RunPack(const PackOptions& options, PackReport* report) {
  Stopwatch clock;
  if (options.inputs.empty()) return Status::InvalidArgument("no inputs");
  const uint32_t chunk = options.pipeline.chunk_size;
  if (chunk == 0 || chunk > kMaxChunkSize) return Status::InvalidArgument("chunk size must be 1 byte .. 64 MiB");
  std::map<std::string, std::string> names;
  for (const std::string& path : options.inputs) {
    std::string name = path == "-" ? options.stdin_name : BaseName(path);
    if (name.empty()) return Status::InvalidArgument("input '" + path + "' has no file name");
    // The name must be one unpack will accept.
    VF_RETURN_IF_ERROR(SplitSafeRelativePath(name).status());
    auto [it, inserted] = names.emplace(name, path);
    if (!inserted)
      return Status::InvalidArgument("inputs '" + it->second + "' and '" + path + "' would both be named '" + name +
                                     "'");
  }

  // Regular files ride the dump graph; any stdin or pipe input makes the
  // whole stream a serial one.
  std::vector<FileInput> files;
  bool all_regular = true;
  for (const std::string& path : options.inputs) {
    FileInput in;
    bool regular = false;
    VF_RETURN_IF_ERROR(OpenRegular(path, &in, &regular));
    all_regular &= regular;
    if (regular) files.push_back(std::move(in));
  }

  PipelineOptions pipeline = options.pipeline;
  if (options.base_refs_only && options.bases.empty() && options.base_store.empty())
    return Status::InvalidArgument("--base-refs-only needs --base");
  TransportOptions transport = options.transport;
  transport.file.overwrite = options.force;
  transport.s3.overwrite = options.force;  // an existing object is refused as a file is
  transport.file.fsync = options.fsync;
  const BudgetPlan budget = PlanPipelineBudget(&pipeline, options.output, &transport, /*write_behind=*/true);
  Result<Endpoint> destination = ParseEndpoint(options.output);
  const bool network = destination.ok() && destination->is_network();
  if (!network && !options.base_store.empty())
    return Status::InvalidArgument("--base-store picks a base that a network receiver holds; '" + options.output +
                                   "' is not one (tcp://, unix:)");
  if (!network && !options.bases.empty()) {
    // Opened before the output, so that a base that cannot serve leaves nothing behind.
    VF_ASSIGN_OR_RETURN(pipeline.base, OpenBase(options, budget.base_index));
    pipeline.base_location = RecordedBaseLocation(options.bases.front(), options.output);
  }
  pipeline.base_refs_only = options.base_refs_only;
  pipeline.chunk_digests = options.digests;

  std::unique_ptr<ByteSink> sink;
  if (network) {
    const BaseCandidates candidates{options.bases, options.base_store};
    VF_ASSIGN_OR_RETURN(NetSinkWithBase chosen,
                        OpenNetSinkWithBase(options.output, transport, candidates, budget.base_index));
    if (!chosen.note.empty()) std::fprintf(stderr, "vramflow pack: %s\n", chosen.note.c_str());
    sink = std::move(chosen.sink);
    pipeline.base = std::move(chosen.base);
    if (pipeline.base && options.base_refs_only && !pipeline.base->has_digests())
      return Status::InvalidArgument(
          "the base the receiver holds has no chunk digests (DIGEST_BLOCKs), which "
          "--base-refs-only needs: leave out --base-refs-only");
    if (!pipeline.base) pipeline.base_refs_only = false;
    // Stored, the stream may be the next one's base, also a refs-only one.
    if (chosen.offer.stores) pipeline.chunk_digests = true;
  } else {
    VF_ASSIGN_OR_RETURN(sink, OpenSink(options.output, transport));
  }
  if (pipeline.base) {
    report->incremental = true;
    report->base_id = HexDigest(pipeline.base->id());
  }
  pipeline.producer = ProducerString();
  if (all_regular) {
    uint64_t total = 0;
    for (const FileInput& in : files) total += in.size;
    ProgressBar bar("pack", total, options.progress);
    pipeline.progress = [&](uint64_t done) { bar.Update(done); };
    VF_RETURN_IF_ERROR(budget.Explain(PackFiles(files, sink.get(), pipeline, report)));
  } else {
    report->sequential = true;
    VF_RETURN_IF_ERROR(budget.Explain(PackSequential(options, sink.get(), pipeline, report)));
  }
  VF_RETURN_IF_ERROR(sink->Commit());
  report->seconds = clock.Seconds();
  return Status::Ok();
}

}  // namespace vramflow
