// SPDX-License-Identifier: MIT
#include "image_streamer/serve.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/cleanup_registry.h"
#include "common/printable.h"
#include "common/private_directory.h"
#include "common/safe_path.h"
#include "common/thread_start.h"
#include "image_streamer/criu_image_socket.h"
#include "image_streamer/image_file_store.h"
#include "image_streamer/tcp_remap.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/decode_ahead.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/stream_reader.h"
#include "streamer/pipeline_fit.h"
#include "transport/core/counting_source.h"
#include "transport/core/file_mapping.h"
#include "transport/core/uri.h"

namespace vramflow {
namespace {

// The image of CRIU's open files, which --tcp-listen-remap rewrites.
constexpr char kCriuFilesImage[] = "files.img";
// Files pushed into CRIU's pipes at once, each on its own thread: CRIU may
// open several files and read them in any order.
constexpr size_t kMaxPushers = 16;
// What serve's budget is when -m is "auto".
constexpr uint64_t kDefaultServeMemory = 256ull << 20;
// How often a wait for CRIU's connection looks at the stream's outcome.
constexpr std::chrono::milliseconds kAcceptPoll{100};

Status WriteProgress(int fd, const std::string& line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("writing a progress line to fd " + std::to_string(fd), errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Fills the store from the verified stream.
class StoreVisitor final : public StreamVisitor {
 public:
  StoreVisitor(ImageFileStore* store, bool check_names, const std::atomic<bool>* stop)
      : store_(store), check_names_(check_names), stop_(stop) {}
  Status OnStreamHeader(const StreamHeader& header) override {
    // The reader's payload and decode buffers, for frames of the stream's chunk size.
    const uint64_t chunk = std::max<uint64_t>(header.chunk_size, 1u << 20);
    store_->SetReaderReserve(ChunkEncoder::MaxPayloadSize(chunk) + ChunkDecoder::MemoryBytes(chunk));
    return Status::Ok();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    VF_RETURN_IF_ERROR(Stopped());
    const std::string* role = o.metadata.Find(kStreamerAttribute);
    const bool file_list = role && *role == kStreamerFileListValue;
    if (check_names_ && !file_list) {
      Result<std::vector<std::string>> parts = SplitSafeRelativePath(o.metadata.name);
      if (!parts.ok()) return parts.status().WithContext("image file name");
      if (parts->size() != 1)
        return Status::Corruption("image file name " + Printable(o.metadata.name) + " is not a plain file name");
    }
    return store_->Begin(o.id, o.metadata.name, file_list);
  }
  Status OnChunk(const ChunkEvent& e) override {
    VF_RETURN_IF_ERROR(Stopped());
    switch (static_cast<FrameKind>(e.header.kind)) {
      case FrameKind::kData: {
        // Where its payload lies, for a store that reads the stream file again.
        const StoredFrame frame{e.stream_offset + kFrameHeaderSize, e.header.payload_size, e.header.codec,
                                e.header.transform, e.header.raw_hash};
        return store_->WriteFrame(e.header.object_id, e.header.offset, frame, e.data);
      }
      case FrameKind::kZeroRun:
        return store_->WriteZeros(e.header.object_id, e.header.offset, e.header.raw_size);
      case FrameKind::kBaseRef:
      case FrameKind::kBaseDelta:  // resolved from the base by the reader
        return store_->Write(e.header.object_id, e.header.offset, e.data);
      case FrameKind::kDedupRef:
        return store_->Copy(e.header.object_id, e.header.offset, e.dedup->source_object_id, e.dedup->source_offset,
                            e.header.raw_size, e.header.raw_hash);
      default:
        return Status::Internal("unexpected chunk kind");
    }
  }
  Status OnObjectEnd(const ObjectState& o) override { return store_->End(o.id, o.size); }

 private:
  Status Stopped() const {
    return stop_->load() ? Status::Cancelled("stopped reading the stream (the command failed)") : Status::Ok();
  }
  ImageFileStore* store_;
  bool check_names_;
  const std::atomic<bool>* stop_;
};

// Reads the stream into the store on a thread of its own. Once the stream is
// verified to its end, the JSON stats line is ready (stats_line()); with
// `print_stats` it is printed on the progress fd at once.
class StreamReaderThread {
 public:
  StreamReaderThread(const StreamerOptions& options, ImageFileStore* store, MemoryBudget* budget,
                     TransportOptions transport, bool check_names, bool print_stats, bool tell_sender_at_end,
                     std::function<void()> on_failure)
      : options_(options),
        print_stats_(print_stats),
        tell_sender_at_end_(tell_sender_at_end),
        store_(store),
        budget_(budget),
        transport_(std::move(transport)),
        check_names_(check_names),
        on_failure_(std::move(on_failure)) {}
  ~StreamReaderThread() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  Status Start() {
    return StartThread(&thread_, "reading the stream", [this] {
      Status s = Read();
      store_->Finish(s);
      if (!s.ok() && on_failure_) on_failure_();
    });
  }
  // Waits for the end of the stream; its outcome.
  Status Join() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  void Stop() { stop_ = true; }
  // After Join() returned OK.
  const std::string& stats_line() const { return stats_line_; }
  // Without `tell_sender_at_end`, a network sender learns the outcome from
  // this call (after Join() returned OK), once the caller has done its part.
  Status TellSender(const Status& outcome) {
    Status told = source_->Finish(outcome);
    if (!outcome.ok()) return outcome;
    return told.WithContext("the files are in place, but telling " + source_->Describe() + " failed");
  }

 private:
  std::string Uri() const {
    if (!options_.stream_uri.empty()) return options_.stream_uri;
    if (!options_.shard_fds.empty()) return "fd:" + std::to_string(options_.shard_fds[0]);
    return "-";
  }
  std::string ReceiverName() const {
    return options_.mode == StreamerOptions::Mode::kServe ? "streamer serve" : "streamer extract";
  }
  Status Read() {
    const auto start = std::chrono::steady_clock::now();
    // An incremental stream's references are read from its base: --base, or
    // where its BASE frame says; from a sender (--listen), only what it was
    // offered (--base-store, or --base), set on transport_ before it listens.
    // The base chain's indexes must fit the budget (-m).
    TransportOptions base_reads = transport_;
    Result<OpenBaseFn> open_base =
        ReaderBaseOpener(Uri(), options_.base, options_.base_store, &base_reads, ReceiverName(), budget_->limit());
    if (!open_base.ok()) return status_ = open_base.status();
    transport_.net.base_offer = base_reads.net.base_offer;
    Result<std::unique_ptr<ByteSource>> source = OpenStreamSource();
    if (!source.ok()) return status_ = source.status();
    source_ = std::move(*source);
    CountingSource counting(source_.get());
    StoreVisitor visitor(store_, check_names_, &stop_);
    // Frames are decoded and checked on several threads ahead of the
    // visitor, which still sees them in stream order.
    DecodeAheadOptions ahead;
    ahead.threads = WithMachineDefaults(options_.pipeline).threads;
    ahead.read.budget = budget_;
    ahead.read.open_base = std::move(*open_base);
    // No note: stderr is criu-image-streamer's progress fd by default, whose
    // lines are read by tools (a budget that feeds fewer threads only slows).
    Status s = ReadStreamDecodingAhead(counting, visitor, ahead);
    if (!s.ok()) s = s.WithContext("reading the stream from " + counting.Describe());
    if (!s.ok() || tell_sender_at_end_) {
      Status told = source_->Finish(s);
      if (s.ok() && !told.ok()) s = told.WithContext("telling " + counting.Describe() + " the stream arrived");
    }
    if (s.ok()) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      stats_line_ = "{\"shards\":[{\"size\":" + std::to_string(counting.bytes()) +
                    ",\"transfer_duration_millis\":" + std::to_string(ms) + "}]}\n";
      if (print_stats_) s = WriteProgress(options_.progress_fd, stats_line_);
    }
    return status_ = s;
  }

  // The stream's source. A regular file (PATH, or stdin or fd:N open on
  // one) that only its owner may write is also given to the store, which
  // then reads DATA frames again from it instead of holding their bytes
  // (ImageFileStore::SetStreamFile); a PATH is opened once for both.
  Result<std::unique_ptr<ByteSource>> OpenStreamSource() {
    VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(Uri()));
    if (endpoint.kind == Endpoint::Kind::kPath) {
      struct stat st;
      if (::stat(endpoint.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return OpenSource(Uri(), transport_);
      stream_file_.Reset(::open(endpoint.path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!stream_file_.valid()) return Status::FromErrno("opening '" + endpoint.path + "'", errno);
      ::posix_fadvise(stream_file_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
      GiveStoreTheStreamFile(stream_file_.get());
      return BorrowFdSource(stream_file_.get(), "'" + endpoint.path + "'");
    }
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(Uri(), transport_));
    if (endpoint.kind == Endpoint::Kind::kStdio) GiveStoreTheStreamFile(STDIN_FILENO);
    if (endpoint.kind == Endpoint::Kind::kFd) GiveStoreTheStreamFile(endpoint.fd);
    return source;
  }
  // Before anything is read from `fd`: the store gets its own descriptor of
  // it, if it is a regular file it may read again (file_mapping.h's rule).
  void GiveStoreTheStreamFile(int fd) {
    if (options_.mode != StreamerOptions::Mode::kServe) return;  // extract writes every file out anyway
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !OnlyOwnerMayWrite(st.st_uid, st.st_mode, ::geteuid())) return;
    const off_t start = ::lseek(fd, 0, SEEK_CUR);
    UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (start < 0 || !own.valid()) return;
    store_->SetStreamFile(std::move(own), static_cast<uint64_t>(start));
  }

  const StreamerOptions& options_;
  bool print_stats_;
  bool tell_sender_at_end_;
  UniqueFd stream_file_;  // a PATH source's fd; declared before source_, which reads it
  std::unique_ptr<ByteSource> source_;
  std::string stats_line_;
  ImageFileStore* store_;
  MemoryBudget* budget_;
  TransportOptions transport_;
  bool check_names_;
  std::function<void()> on_failure_;
  std::atomic<bool> stop_{false};
  Status status_;  // written by the thread, read after join
  std::thread thread_;
};

// Writes one taken file into `fd` and frees it. SIGPIPE is blocked on the
// calling thread, so a reader that went away is an EPIPE error, not a death.
Status Push(ImageFileStore* store, const std::shared_ptr<ImageFileStore::File>& file, UniqueFd fd,
            const std::string& what) {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  (void)::fcntl(fd.get(), F_SETPIPE_SZ, 1 << 20);  // fewer wake-ups where allowed; not needed
  Status s = store->WriteTo(*file, fd.get(), what);
  store->Release(file);
  return s;
}

// Threads pushing files, at most kMaxPushers at once; the first error is kept.
class PushThreads {
 public:
  ~PushThreads() { (void)Join(); }
  // Runs `push` on a new thread once fewer than kMaxPushers run.
  Status Start(std::function<Status()> push) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return running_ < kMaxPushers; });
    ReapLocked();
    ++running_;
    threads_.emplace_back();
    auto* slot = &threads_.back();
    Status s = StartThread(&slot->thread, "pushing an image file", [this, slot, push = std::move(push)] {
      Status status = push();
      std::lock_guard<std::mutex> guard(mu_);
      if (!status.ok() && first_error_.ok()) first_error_ = status;
      slot->finished = true;
      --running_;
      done_.notify_all();
    });
    if (!s.ok()) {
      --running_;
      threads_.pop_back();
    }
    return s;
  }
  Status error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }
  // Waits for every push; the first error.
  Status Join() {
    std::list<Slot> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.splice(all.end(), threads_);
    }
    for (Slot& slot : all)
      if (slot.thread.joinable()) slot.thread.join();
    return error();
  }

 private:
  struct Slot {
    std::thread thread;
    bool finished = false;
  };
  void ReapLocked() {
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->finished) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
  }
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::list<Slot> threads_;  // guarded by mu_
  size_t running_ = 0;       // guarded by mu_
  Status first_error_;       // guarded by mu_
};

std::set<std::string> ExtNames(const StreamerOptions& options) {
  std::set<std::string> names;
  for (const auto& [name, fd] : options.ext_files) names.insert(name);
  return names;
}

bool IsExtFile(const StreamerOptions& options, const std::string& name) {
  for (const auto& [ext, fd] : options.ext_files)
    if (ext == name) return true;
  return false;
}

// -e NAME:FD: each ext file is written into its fd once it has arrived, and
// the fd is closed; a stream that ends without it is an error.
Status StartExtFiles(const StreamerOptions& options, ImageFileStore* store, PushThreads* pushers) {
  for (const auto& [name, fd] : options.ext_files) {
    VF_RETURN_IF_ERROR(pushers->Start([store, name = name, fd = fd]() -> Status {
      UniqueFd out(fd);
      VF_ASSIGN_OR_RETURN(std::shared_ptr<ImageFileStore::File> file, store->Take(name));
      if (!file)
        return Status::InvalidArgument("ext file " + Printable(name) + " (--ext-file-fds) is not in the stream");
      return Push(store, file, std::move(out), "ext file " + Printable(name) + " into fd " + std::to_string(fd));
    }));
  }
  return Status::Ok();
}

std::string SpillParent(const StreamerOptions& options) {
  if (!options.spill_dir.empty()) return options.spill_dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

Status CreateImagesDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("creating the images directory " + Printable(dir) + ": " + ec.message());
  return Status::Ok();
}

// The memory budget (all of serve's file buffers and the reader's), after a
// network source took its share.
uint64_t ServeMemory(const StreamerOptions& options, TransportOptions* transport) {
  const uint64_t memory = options.pipeline.max_memory ? options.pipeline.max_memory : kDefaultServeMemory;
  if (options.stream_uri.empty()) return memory;
  return PlanReaderBudget(memory, options.stream_uri, transport).pipeline;
}

// Answers CRIU's requests until it closes the connection.
Status AnswerCriu(const StreamerOptions& options, CriuImageSocket* socket, ImageFileStore* store,
                  PushThreads* pushers) {
  for (;;) {
    VF_RETURN_IF_ERROR(pushers->error());
    VF_ASSIGN_OR_RETURN(std::optional<std::string> name, socket->NextRequest());
    if (!name) return Status::Ok();  // CRIU is done
    std::shared_ptr<ImageFileStore::File> file;
    if (*name != kStreamerFileListObject && !IsExtFile(options, *name)) {
      Result<std::shared_ptr<ImageFileStore::File>> taken = store->Take(*name);
      if (!taken.ok()) {
        if (taken.status().code() == Status::Code::kInvalidArgument)
          return Status::InvalidArgument("CRIU requests image file " + Printable(*name) +
                                         " a second time (each file is served once, as criu-image-streamer)");
        return taken.status();
      }
      file = std::move(*taken);
    }
    VF_RETURN_IF_ERROR(socket->Reply(file != nullptr));
    if (!file) continue;
    VF_ASSIGN_OR_RETURN(UniqueFd pipe, socket->ReceivePipe(*name));
    auto shared_pipe = std::make_shared<UniqueFd>(std::move(pipe));
    VF_RETURN_IF_ERROR(pushers->Start([store, file, shared_pipe, what = "image file " + Printable(*name)] {
      return Push(store, file, std::move(*shared_pipe), what);
    }));
  }
}

}  // namespace

Status RunStreamerServe(const StreamerOptions& options) {
  VF_RETURN_IF_ERROR(CreateImagesDir(options.images_dir));
  PrivateDirectory spill;
  VF_RETURN_IF_ERROR(spill.Create(SpillParent(options) + "/.vramflow-serve-spill-", options.cleanup));
  TransportOptions transport = options.transport;
  MemoryBudget budget(ServeMemory(options, &transport));
  ImageFileStore store(&budget, spill.path(), /*spill_all=*/false, ExtNames(options));
  VF_RETURN_IF_ERROR(store.Open());
  // --tcp-listen-remap: CRIU gets files.img rewritten (image_streamer/tcp_remap.h);
  // a stream without files.img cannot have the ports asked for.
  auto remapped = std::make_shared<std::atomic<bool>>(false);
  if (!options.tcp_listen_remap.empty())
    store.SetRewrite(
        kCriuFilesImage,
        [remap = options.tcp_listen_remap, remapped](std::vector<uint8_t> bytes) -> Result<std::vector<uint8_t>> {
          VF_ASSIGN_OR_RETURN(TcpListenRemapResult result, RemapTcpListenPorts(bytes, remap));
          *remapped = true;
          return std::move(result.files_img);
        });

  VF_ASSIGN_OR_RETURN(CriuImageSocket socket,
                      CriuImageSocket::Listen(options.images_dir, /*capture=*/false, options.cleanup));
  VF_RETURN_IF_ERROR(WriteProgress(options.progress_fd, "socket-init\n"));

  // A failed stream ends CRIU's connection, so that a CRIU waiting for a
  // file (or working between requests) stops at once.
  std::mutex connection_mu;
  bool connected = false;
  bool stream_failed = false;
  auto on_failure = [&] {
    std::lock_guard<std::mutex> lock(connection_mu);
    stream_failed = true;
    if (connected) socket.Shutdown();
  };
  // Destroyed (joined) after the reader, which wakes the ext files' waits.
  // The ext files have threads of their own: waiting for the stream, they
  // never hold up a push into CRIU.
  PushThreads pushers;
  PushThreads ext_pushers;
  StreamReaderThread reader(options, &store, &budget, transport, /*check_names=*/false, /*print_stats=*/true,
                            /*tell_sender_at_end=*/true, on_failure);
  VF_RETURN_IF_ERROR(reader.Start());
  VF_RETURN_IF_ERROR(StartExtFiles(options, &store, &ext_pushers));

  const auto deadline = options.criu_timeout_s < 0
                            ? std::chrono::steady_clock::time_point::max()
                            : std::chrono::steady_clock::now() +
                                  std::chrono::milliseconds(static_cast<int64_t>(options.criu_timeout_s * 1000));
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(connection_mu);
      if (stream_failed) break;
    }
    Status s = socket.Accept(kAcceptPoll);
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(connection_mu);
      connected = true;
      if (stream_failed) socket.Shutdown();
      break;
    }
    if (s.code() != Status::Code::kTimedOut) return s;
    if (std::chrono::steady_clock::now() >= deadline)
      return Status::TimedOut("CRIU did not connect to " + socket.path() + " within --criu-timeout");
  }
  Status answered = connected ? AnswerCriu(options, &socket, &store, &pushers) : Status::Ok();
  if (!answered.ok()) {
    reader.Stop();
    socket.Shutdown();
  }
  Status pushed = pushers.Join();
  Status read = reader.Join();
  Status ext = ext_pushers.Join();
  // The stream's own error says most (CRIU saw the connection end because
  // of it); a read we stopped says nothing.
  if (!read.ok() && read.code() != Status::Code::kCancelled) return read;
  VF_RETURN_IF_ERROR(answered);
  VF_RETURN_IF_ERROR(read);
  VF_RETURN_IF_ERROR(pushed);
  VF_RETURN_IF_ERROR(ext);
  if (!options.tcp_listen_remap.empty() && !*remapped)
    return Status::InvalidArgument("--tcp-listen-remap: the stream holds no files.img, so no listening TCP socket");
  return Status::Ok();
}

Status RunStreamerExtract(const StreamerOptions& options) {
  VF_RETURN_IF_ERROR(CreateImagesDir(options.images_dir));
  UniqueFd dir(::open(options.images_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return Status::FromErrno("opening the images directory " + Printable(options.images_dir), errno);
  // Files are staged beside their place and moved in once the stream is verified.
  PrivateDirectory staging;
  VF_RETURN_IF_ERROR(staging.Create(options.images_dir + "/.vramflow-extract-", options.cleanup));
  TransportOptions transport = options.transport;
  MemoryBudget budget(ServeMemory(options, &transport));
  ImageFileStore store(&budget, staging.path(), /*spill_all=*/true, ExtNames(options));
  VF_RETURN_IF_ERROR(store.Open());
  PushThreads pushers;
  StreamReaderThread reader(options, &store, &budget, transport, /*check_names=*/true, /*print_stats=*/false,
                            /*tell_sender_at_end=*/false, {});
  VF_RETURN_IF_ERROR(reader.Start());
  VF_RETURN_IF_ERROR(StartExtFiles(options, &store, &pushers));
  Status read = reader.Join();
  Status pushed = pushers.Join();
  VF_RETURN_IF_ERROR(read);
  VF_RETURN_IF_ERROR(pushed);
  auto move = [&] { return store.MoveInto(dir.get(), options.images_dir); };
  // A network sender's Commit() succeeds only once every file is in place.
  VF_RETURN_IF_ERROR(reader.TellSender(options.cleanup ? options.cleanup->Exclusive(move) : move()));
  return WriteProgress(options.progress_fd, reader.stats_line());
}

}  // namespace vramflow
