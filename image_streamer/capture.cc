// SPDX-License-Identifier: MIT
#include "image_streamer/capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/progress.h"
#include "common/safe_path.h"
#include "common/version.h"
#include "image_streamer/criu_image_socket.h"
#include "image_streamer/file_list.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/concurrent_dump.h"
#include "streamer/format/frame_format.h"
#include "streamer/pipeline_fit.h"
#include "transport/open_uri.h"

namespace vramflow {
namespace {

// The first file of every dump, read before the application is frozen: the
// first request for any other file says the checkpoint has started.
constexpr char kCpuinfoImage[] = "cpuinfo.img";
// What every complete dump writes last (criu/cr-dump.c: cr_dump_tasks ends
// with write_img_inventory() only when everything before it succeeded).
constexpr char kInventoryImage[] = "inventory.img";
// CRIU's INVENTORY_MAGIC (criu/include/magic.h). inventory.img is the one
// image without the common magic before its own: the magic, then one
// protobuf entry (a 4-byte length and that many bytes).
constexpr uint32_t kInventoryMagic = 0x58313116;

Status WriteProgressLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("writing '" + line + "' to the progress fd " + std::to_string(fd), errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

bool IsPagesImage(const std::string& name) {
  return name.rfind("pages-", 0) == 0 && name.size() > 10 && name.compare(name.size() - 4, 4, ".img") == 0;
}

bool StartsWithStreamMagic(std::span<const uint8_t> bytes) {
  return bytes.size() >= kStreamMagic.size() &&
         std::memcmp(bytes.data(), kStreamMagic.data(), kStreamMagic.size()) == 0;
}

// The first bytes of inventory.img, kept by its storage choice for the
// completeness check.
struct InventoryHead {
  std::mutex mu;
  std::vector<uint8_t> bytes;  // GUARDED_BY(mu)
};

// How an input is stored (docs/CLI.md, "streamer capture"): a vramflow
// stream (the plugin's VRAM streams) and CRIU's small images as they are;
// pages, large files and ext files through the configured codec.
ChunkStorage ChooseStorage(const std::string& name, bool criu_file, std::span<const uint8_t> first, bool whole) {
  if (StartsWithStreamMagic(first)) return ChunkStorage::kRaw;
  if (criu_file && whole && !IsPagesImage(name)) return ChunkStorage::kRaw;
  return ChunkStorage::kEncoded;
}

ConcurrentInput MakeInput(const std::string& name, bool criu_file, UniqueFd fd, InventoryHead* inventory) {
  ConcurrentInput input;
  input.metadata.name = name;
  input.fd = std::move(fd);
  input.choose_storage = [name, criu_file, inventory](std::span<const uint8_t> first, bool whole) {
    if (criu_file && name == kInventoryImage) {
      std::lock_guard<std::mutex> lock(inventory->mu);
      inventory->bytes.assign(first.begin(), first.begin() + std::min<size_t>(first.size(), 64));
    }
    return ChooseStorage(name, criu_file, first, whole);
  };
  return input;
}

uint32_t Le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24); }

// A dump CRIU ended (or was killed) before it finished has no whole
// inventory.img: see kInventoryImage.
Status CheckDumpComplete(const std::vector<ConcurrentObject>& objects, InventoryHead* inventory) {
  const ConcurrentObject* found = nullptr;
  for (const ConcurrentObject& object : objects)
    if (object.name == kInventoryImage) found = &object;
  const std::string incomplete = "CRIU's dump is incomplete (it failed or was killed): ";
  if (!found)
    return Status::Truncated(incomplete + "CRIU never wrote " + kInventoryImage +
                             ", the file every complete dump writes last; nothing was committed");
  std::lock_guard<std::mutex> lock(inventory->mu);
  const std::vector<uint8_t>& head = inventory->bytes;
  if (head.size() < 8 || Le32(head.data()) != kInventoryMagic)
    return Status::Truncated(incomplete + std::string(kInventoryImage) + " (" + std::to_string(found->size) +
                             " bytes) does not start with CRIU's inventory magic; nothing was committed");
  const uint64_t expected = 8ull + Le32(head.data() + 4);
  if (found->size != expected)
    return Status::Truncated(incomplete + std::string(kInventoryImage) + " holds " + std::to_string(found->size) +
                             " bytes where its entry needs " + std::to_string(expected) + "; nothing was committed");
  return Status::Ok();
}

// The file list object (docs/CLI.md): every name, each followed by a NUL.
ConcurrentInput FileListInput(const std::vector<std::string>& names) {
  ConcurrentInput input;
  input.metadata.name = kStreamerFileListObject;
  input.metadata.attributes.emplace_back(kStreamerAttribute, kStreamerFileListValue);
  for (const std::string& name : names) {
    input.content.insert(input.content.end(), name.begin(), name.end());
    input.content.push_back(0);
  }
  input.choose_storage = [](std::span<const uint8_t>, bool) { return ChunkStorage::kRaw; };
  return input;
}

Status Capture(const StreamerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(options.images_dir, ec);
  if (ec) return Status::IoError("creating the images directory " + options.images_dir + ": " + ec.message());

  // The ext files are ours from now on (closed when done), and must be
  // names the stream's readers accept.
  std::vector<std::pair<std::string, UniqueFd>> ext_files;
  std::set<std::string> names;
  for (const auto& [name, fd] : options.ext_files) {
    VF_RETURN_IF_ERROR(CheckSafeFileName(name).WithContext("--ext-file-fds " + name));
    if (name == kStreamerFileListObject)
      return Status::InvalidArgument("--ext-file-fds: the name " + name + " is the stream's own file list");
    if (!names.insert(name).second) return Status::InvalidArgument("--ext-file-fds: " + name + " given twice");
    if (::fcntl(fd, F_GETFD) < 0) return Status::FromErrno("--ext-file-fds " + name + ":" + std::to_string(fd), errno);
    ext_files.emplace_back(name, UniqueFd(fd));
  }

  const std::string uri = !options.stream_uri.empty()
                              ? options.stream_uri
                              : "fd:" + std::to_string(options.shard_fds.empty() ? 1 : options.shard_fds[0]);
  TransportOptions transport = options.transport;
  transport.file.overwrite = options.force;
  transport.s3.overwrite = options.force;
  // A checkpoint is durable once capture says it is complete.
  transport.file.fsync = true;
  PipelineOptions pipeline = options.pipeline;
  const BudgetPlan budget = PlanPipelineBudget(&pipeline, uri, &transport);
  pipeline.producer = ProducerString();
  // --base: an incremental checkpoint, each file coded against the base's
  // file of the same name (ConcurrentDump), its index within the budget.
  if (!options.base.empty()) {
    VF_ASSIGN_OR_RETURN(pipeline.base, OpenCliBase(options.base, transport, budget.base_index));
    pipeline.base_location = RecordedBaseLocation(options.base.front(), uri);  // as pack records it
  }
  // pipeline.dedup as asked (default on): references within one file only
  // (ConcurrentDump), which serve can always resolve.

  // These two outlive the dump, whose threads use them.
  InventoryHead inventory;
  ProgressBar bar("capture", 0, options.progress);  // vramflow's own --progress (off by default)
  pipeline.progress = [&bar](uint64_t done) { bar.Update(done); };
  // The output first: a destination that cannot be written fails before
  // CRIU could start.
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(uri, transport));
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ConcurrentDump> dump, ConcurrentDump::Start(sink.get(), pipeline));
  std::vector<std::string> file_names;
  for (auto& [name, fd] : ext_files) {
    file_names.push_back(name);
    VF_RETURN_IF_ERROR(dump->Add(MakeInput(name, /*criu_file=*/false, std::move(fd), &inventory)));
  }
  VF_ASSIGN_OR_RETURN(CriuImageSocket socket,
                      CriuImageSocket::Listen(options.images_dir, /*capture=*/true, options.cleanup));
  VF_RETURN_IF_ERROR(WriteProgressLine(options.progress_fd, "socket-init"));
  VF_RETURN_IF_ERROR(socket.Accept(std::chrono::milliseconds(
      options.criu_timeout_s < 0 ? -1 : static_cast<int64_t>(options.criu_timeout_s * 1000))));

  bool checkpoint_started = false;
  while (true) {
    VF_ASSIGN_OR_RETURN(std::optional<std::string> request, socket.NextRequest());
    if (!request) break;  // CRIU closed the connection: no more files
    const std::string& name = *request;
    if (name == kStreamerFileListObject)
      return Status::InvalidArgument("CRIU asked for image file " + name + ", the name of the stream's own file list");
    if (!names.insert(name).second)
      return Status::InvalidArgument("CRIU is sending image file " + name + " a second time");
    if (!checkpoint_started && name != kCpuinfoImage) {
      checkpoint_started = true;
      VF_RETURN_IF_ERROR(WriteProgressLine(options.progress_fd, "checkpoint-start"));
    }
    VF_ASSIGN_OR_RETURN(UniqueFd pipe, socket.ReceivePipe(name));
    file_names.push_back(name);
    VF_RETURN_IF_ERROR(dump->Add(MakeInput(name, /*criu_file=*/true, std::move(pipe), &inventory)));
  }

  VF_RETURN_IF_ERROR(dump->Add(FileListInput(file_names)));
  std::vector<ConcurrentObject> objects;
  VF_RETURN_IF_ERROR(dump->Drain(&objects));
  VF_RETURN_IF_ERROR(CheckDumpComplete(objects, &inventory));
  PipelineStats stats;
  VF_RETURN_IF_ERROR(dump->Finish(&stats));
  VF_RETURN_IF_ERROR(sink->Commit());
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  return WriteProgressLine(options.progress_fd, "{\"shards\":[{\"size\":" + std::to_string(stats.stream_bytes) +
                                                    ",\"transfer_duration_millis\":" + std::to_string(millis) + "}]}");
}

}  // namespace

Status RunStreamerCapture(const StreamerOptions& options) { return Capture(options); }

}  // namespace vramflow
