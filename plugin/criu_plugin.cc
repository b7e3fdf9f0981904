// SPDX-License-Identifier: MIT
// amdgpu_plugin.so: the CRIU plugin entry points (registered under CRIU's
// own plugin name "amdgpu_plugin", so images of either implementation pass
// CRIU's inventory check).
//
// Built against the criu-plugin.h found at configure time; CMake detects
// which hooks that CRIU generation has (VRAMFLOW_CRIU_HAS_* below) and only
// those are registered. Every hook answers -ENOTSUP for fds, VMAs and pids
// that are not KFD's or a render node's, as CRIU requires.
//
// The hooks only translate between CRIU's calling convention and the
// plugin's code (plugin/criu_dump.h, criu_restore.h). CRIU plugins are
// process-global by nature: the one PluginState lives from init to fini, and
// forked restored tasks get their own copy of it.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/version.h"
#include "plugin/criu_dump.h"
#include "plugin/criu_log.h"
#include "plugin/criu_restore.h"
#include "plugin/image_store.h"
#include "plugin/kfd/gpu_backend.h"
#include "plugin/kfd_file_list.h"
#include "plugin/kfd_image.h"
#include "plugin/parallel_restore.h"
#include "plugin/plugin_backend.h"
#include "plugin/plugin_options.h"
#include "plugin/restore_progress.h"
#include "streamer/machine/tbb_workers.h"

// Everything here is hidden except the descriptor CRIU looks up by name
// (plugin/amdgpu_plugin.map exports only it).
#pragma GCC visibility push(default)
extern "C" {
#include <criu/criu-plugin.h>
}
#pragma GCC visibility pop

namespace vramflow {
namespace {

constexpr char kPluginName[] = "amdgpu_plugin";
// How long RESUME_DEVICES_LATE waits for the main process's BO restore.
constexpr std::chrono::hours kParallelRestoreTimeout{1};

struct PluginState {
  int stage = -1;
  // CRIU's inventory lists the plugins a dump needs (CRIU 4.1+): added once
  // this dump has a GPU file of ours.
  bool in_inventory = false;
  PluginOptions options;
  std::unique_ptr<GpuBackend> backend;
  std::unique_ptr<ImageStore> images;       // made at first use: CRIU's images dir is open by then
  std::unique_ptr<ImageStore> vram_target;  // VRAMFLOW_TARGET, if set
  PluginContext context;
  // Dump: the process's GPUs seen so far (actual -> user gpu_id) and KFD
  // files left paused until DUMP_DEVICES_LATE.
  std::map<uint32_t, uint32_t> user_gpu_ids;
  std::vector<UniqueFd> paused;
  DumpedBos dumped_bos;               // every process's, to refuse BOs shared between them
  std::vector<int> dumped_kfd_files;  // their CRIU file ids, for the KFD file list
  // The images this dump wrote, and CRIU's images directory (-1 under
  // --stream): an earlier dump's images there go at DUMP_DEVICES_LATE.
  std::set<std::string> written_images;
  int images_dir = -1;
  // Restore.
  TaskRestoreState task;
  std::unique_ptr<ParallelRestoreServer> parallel;
  bool parallel_started = false;
  // Parallel restore only: the KFD files the tasks will restore (the dump's
  // list) and how far they are, shared with every task.
  size_t expected_kfd_files = 0;
  std::unique_ptr<RestoreProgress> progress;
};

PluginState* g_state = nullptr;

// CRIU's log (print_on_level, looked up once).
const CriuLog& Log() {
  static const CriuLog log;
  return log;
}

int Fail(const char* hook, const Status& status) {
  Log().Error(std::string(hook) + ": " + status.ToString());
  return -(status.code() == Status::Code::kInvalidArgument ? EINVAL : EIO);
}

// Ends oneTBB's worker threads when a hook returns: CRIU dlcloses the plugin
// at fini, and a restored task's address space is replaced by CRIU's
// restorer, so no thread of ours may outlive the hook that started it.
class JoinWorkersOnReturn {
 public:
  explicit JoinWorkersOnReturn(const char* hook) : hook_(hook) {}
  ~JoinWorkersOnReturn() {
    Status s = JoinTbbWorkerThreads();
    if (!s.ok()) Fail(hook_, s);
  }
  JoinWorkersOnReturn(const JoinWorkersOnReturn&) = delete;
  JoinWorkersOnReturn& operator=(const JoinWorkersOnReturn&) = delete;

 private:
  const char* hook_;
};

// CRIU's helpers, looked up at run time (the plugin links with -z defs and
// is loaded into the criu binary, which exports them).
template <typename Fn>
Fn CriuSymbol(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

bool StreamerSocketPresent(int images_dir, bool dump) {
  struct stat st;
  const char* name = dump ? "streamer-capture.sock" : "streamer-serve.sock";
  return ::fstatat(images_dir, name, &st, 0) == 0 && S_ISSOCK(st.st_mode);
}

// A path to CRIU's images directory: its own path where that names the same
// directory here (clearer messages), else the fd's /proc path (restored
// tasks may live in another mount namespace).
std::string ImagesDirPath(int dir) {
  const std::string by_fd = "/proc/self/fd/" + std::to_string(dir);
  char target[4096];
  const ssize_t n = ::readlink(by_fd.c_str(), target, sizeof target - 1);
  struct stat a, b;
  if (n <= 0 || ::fstat(dir, &a) != 0) return by_fd;
  target[n] = '\0';
  if (::stat(target, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) return by_fd;
  return target;
}

#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
// CRIU's images directory where a dump writes its images there; -1 under
// --stream or outside CRIU. Needs no context: a dump without GPU files has none.
int DumpImagesDir() {
  const PluginState& s = *g_state;
  if (s.images) return s.images_dir;
  auto get_dir = CriuSymbol<int (*)()>("criu_get_image_dir");
  if (!get_dir) return -1;
  const int dir = get_dir();
  const bool stream = s.options.criu_stream == Tristate::kOn ||
                      (s.options.criu_stream == Tristate::kAuto && StreamerSocketPresent(dir, /*dump=*/true));
  return stream ? -1 : dir;
}
#endif

// The images store and the context, made on first use.
Result<const PluginContext*> Context() {
  PluginState& s = *g_state;
  if (s.images) return &s.context;
  auto get_dir = CriuSymbol<int (*)()>("criu_get_image_dir");
  if (!get_dir) return Status::NotSupported("criu_get_image_dir is not available: not running inside CRIU");
  const int dir = get_dir();
  const bool dump = s.stage != CR_PLUGIN_STAGE__RESTORE;
  auto streamer = CriuSymbol<StreamerOpenFn>("img_streamer_open");
  bool stream = s.options.criu_stream == Tristate::kOn ||
                (s.options.criu_stream == Tristate::kAuto && StreamerSocketPresent(dir, dump));
  if (stream && !streamer)
    return Status::NotSupported("CRIU's image streamer is in use, but img_streamer_open is not exported");
  // An s3:// target or base without its SSE-C key would be written
  // unencrypted, or not read.
  if (!s.options.target.empty() || !s.options.base.empty()) VF_RETURN_IF_ERROR(s.options.sse_c_key_error);
  if (!s.options.target.empty()) {
    // A network target without its key would send VRAM unauthenticated.
    VF_RETURN_IF_ERROR(s.options.key_error);
    VF_ASSIGN_OR_RETURN(s.vram_target, TargetStore(s.options.target, s.options.transport));
  }
  s.images_dir = stream ? -1 : dir;
  // Last: a made store means a complete context.
  s.images = stream ? CriuStreamerStore(streamer, dump) : DirectoryStore(ImagesDirPath(dir));
  s.context.backend = s.backend.get();
  s.context.options = &s.options;
  s.context.images = s.images.get();
  s.context.vram = s.vram_target ? s.vram_target.get() : s.images.get();
  s.context.find_unused_fd_pid = CriuSymbol<int (*)(int)>("find_unused_fd_pid");
  s.context.dumped_bos = &s.dumped_bos;
  return &s.context;
}

Result<GpuFileKind> ClassifyFd(int fd, struct stat* st) {
  if (::fstat(fd, st) != 0) return Status::FromErrno("fstat of fd " + std::to_string(fd), errno);
  return g_state->backend->Classify(*st);
}

// Restore init, main CRIU process: the dump's KFD file list and the page
// the tasks report their progress on.
Status PrepareParallelRestore() {
  PluginState& s = *g_state;
  VF_ASSIGN_OR_RETURN(const PluginContext* ctx, Context());
  VF_ASSIGN_OR_RETURN(std::optional<KfdFileList> files, ReadKfdFileList(*ctx->images));
  if (!files) return Status::NotSupported(std::string("the images have no ") + kKfdFileListImage);
  s.expected_kfd_files = files->ids.size();
  // The worker refuses streams of another dump; the tasks, KFD images of one.
  s.context.dump_id = files->dump_id;
  Log().Info("restoring dump " +
             (files->dump_id.empty() ? std::string("(no id: an older vramflow's)") : files->dump_id));
  VF_ASSIGN_OR_RETURN(s.progress, RestoreProgress::Create());
  return Status::Ok();
}

#ifdef VRAMFLOW_CRIU_HAS_POST_FORKING
// The children of the main CRIU process now (the restored tree's root task
// and CRIU's helpers, which live until the tasks are restored).
std::vector<pid_t> Children() {
  std::vector<pid_t> pids;
  std::ifstream in("/proc/self/task/" + std::to_string(::gettid()) + "/children");
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

bool Exited(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}

// POST_FORKING, after the worker started: waits until every KFD file of the
// dump is done in its task and the worker has filled every BO handed to it.
// A task that failed, a task tree that is gone, or no progress within the
// timeout ends the wait with an error, and CRIU kills the tree.
Status WaitForKfdFiles() {
  PluginState& s = *g_state;
  const auto deadline = std::chrono::steady_clock::now() + kParallelRestoreTimeout;
  const std::vector<pid_t> children = Children();
  while (s.progress->done() < s.expected_kfd_files) {
    if (s.progress->failed() > 0)
      return Status::Cancelled("a restored task failed to restore a GPU file (its error is above)");
    for (pid_t child : children)
      if (Exited(child))
        return Status::Cancelled("process " + std::to_string(child) + " of the restore exited after " +
                                 std::to_string(s.progress->done()) + " of " + std::to_string(s.expected_kfd_files) +
                                 " KFD files were restored");
    if (std::chrono::steady_clock::now() > deadline)
      return Status::TimedOut(std::to_string(s.progress->done()) + " of " + std::to_string(s.expected_kfd_files) +
                              " KFD files restored after " + std::to_string(kParallelRestoreTimeout.count()) + " h");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return s.parallel->Finish(std::max(left, std::chrono::milliseconds(1)))
      .WithContext("restoring BO contents in the main CRIU process");
}

#endif

// Parallel restore runs two threads in the main CRIU process. They must not
// exist while CRIU forks the restored tasks: a child of a multi-threaded
// process inherits whatever locks those threads held (malloc's under some
// allocators, any of ours) and may only make async-signal-safe calls. So they
// start in POST_FORKING, as upstream's worker does; a CRIU without that hook
// (before 4.2) restores in the tasks, and refuses an explicit request.
Result<bool> ParallelRestoreWanted(Tristate setting) {
#ifdef VRAMFLOW_CRIU_HAS_POST_FORKING
  return setting != Tristate::kOff;
#else
  if (setting == Tristate::kOn)
    return Status::NotSupported(
        "VRAMFLOW_PARALLEL_RESTORE=1 needs CRIU's POST_FORKING hook (CRIU 4.2+), and this plugin was built "
        "against a criu-plugin.h without it: the worker's threads would run while CRIU forks the restored tasks");
  return false;
#endif
}

// CRIU 4.1+ records in its inventory image which plugins a dump needs and
// refuses a restore whose plugins did not claim their entries (CRIU before
// 4.1 has neither function; every plugin then runs).
void AddToInventory() {
  PluginState& s = *g_state;
  if (s.in_inventory) return;
  auto add = CriuSymbol<int (*)(const char*)>("add_inventory_plugin");
  if (add && add(kPluginName) != 0) {
    Log().Error("adding amdgpu_plugin to CRIU's inventory failed: the restore will not know it needs this plugin");
    return;
  }
  s.in_inventory = true;
}

// Restore: whether the dump needed this plugin (and claims its inventory entry).
bool ClaimInventoryEntry() {
  auto check = CriuSymbol<bool (*)(const char*, size_t)>("check_and_remove_inventory_plugin");
  return !check || check(kPluginName, std::strlen(kPluginName));
}

std::string Percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

void LogDump(const PluginContext& ctx, int id, const KfdDumpResult& r) {
  const PipelineStats& st = r.stats;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "KFD file %d: %zu GPUs, %llu BOs, %.1f MiB of VRAM/GTT into %.1f MiB (ratio %.3f), %.2f s (%.0f MB/s), to %s", id,
      r.user_gpu_ids.size(), static_cast<unsigned long long>(st.objects), st.raw_bytes / 1048576.0,
      st.stream_bytes / 1048576.0, st.stream_bytes ? double(st.raw_bytes) / double(st.stream_bytes) : 0.0, st.seconds,
      st.seconds > 0 ? st.raw_bytes / st.seconds / 1e6 : 0.0, ctx.vram->Describe().c_str());
  Log().Info(line);
  Log().Debug("KFD file " + std::to_string(id) + ": zero runs " + Percent(st.zero_bytes, st.raw_bytes) + "%, dedup " +
              Percent(st.dedup_bytes, st.raw_bytes) + "% of the bytes");
  if (!ctx.options->base.empty())
    Log().Info("KFD file " + std::to_string(id) + ": incremental against VRAMFLOW_BASE=" + ctx.options->base + ": " +
               Percent(st.base_ref_bytes, st.raw_bytes) + "% of the bytes referenced, " +
               Percent(st.base_delta_bytes, st.raw_bytes) + "% coded as deltas");
}

Status Init(int stage) {
  const CriuLog& log = Log();
  log.Info("vramflow " + VersionString() + " (built for CRIU's plugin ABI with " + std::to_string(CR_PLUGIN_HOOK__MAX) +
           " hooks), stage " + std::to_string(stage));
  if (stage == CR_PLUGIN_STAGE__RESTORE && !ClaimInventoryEntry()) {
    // Every hook then answers -ENOTSUP (g_state stays null), as upstream's plugin does.
    log.Info("the images were dumped without amdgpu_plugin (CRIU's inventory does not list it): disabled");
    return Status::Ok();
  }
  auto state = std::make_unique<PluginState>();
  state->stage = stage;
  // A value that does not parse is logged and ignored, never fatal: CRIU
  // initialises every plugin in its directory, so a failing init would stop
  // every dump on the host, GPU or not.
  VF_ASSIGN_OR_RETURN(state->options, PluginOptionsFromEnvironment(::getenv));
  for (const std::string& warning : state->options.warnings) log.Error(warning);
  // The network transport's warnings (--insecure) and refused connections
  // (a failed TLS handshake, a UNIX peer of another user) go to CRIU's log.
  state->options.transport.net.log = [](const std::string& line) { Log().Warn(line); };
  state->options.pipeline.note = [](const std::string& line) { Log().Warn(line); };
  for (const std::string& param : state->options.ParamLines()) log.Info(param);
  VF_ASSIGN_OR_RETURN(state->backend, OpenPluginBackend(state->options));
  if (stage == CR_PLUGIN_STAGE__RESTORE) {
    Result<bool> parallel = ParallelRestoreWanted(state->options.parallel_restore);
    if (!parallel.ok()) log.Error(parallel.status().ToString() + "; restoring in the tasks");
    if (parallel.ok() && *parallel) {  // only the listening socket now; connections queue until POST_FORKING
      VF_ASSIGN_OR_RETURN(state->parallel, ParallelRestoreServer::Listen(UniqueParallelRestoreName()));
    }
  }
  if (stage != CR_PLUGIN_STAGE__RESTORE) {
    // One id for every process of this dump: CRIU dumps every task's files in its main process.
    state->context.dump_id = NewDumpId();
    log.Info("dump id " + state->context.dump_id);
  }
  g_state = state.release();
  if (g_state->parallel) {
    // POST_FORKING must know how many KFD files to wait for; without the
    // dump's list, each task fills its own BOs (its failures stop CRIU).
    Status s = PrepareParallelRestore();
    if (!s.ok()) {
      log.Error(s.ToString() + "; restoring BO contents in each task");
      g_state->parallel.reset();
      g_state->progress.reset();
    }
  }
  return Status::Ok();
}

int PluginInit(int stage) {
  Status s = Init(stage);
  return s.ok() ? 0 : Fail("init", s);
}

void PluginFini(int stage, int ret) {
  if (!g_state) return;
  // A dump that failed before DUMP_DEVICES_LATE leaves no process paused.
  for (UniqueFd& fd : g_state->paused) {
    Status s = g_state->backend->Kfd().Unpause(fd.get());
    if (!s.ok()) Fail("fini", s);
  }
  delete g_state;  // joins the parallel-restore worker, if any
  g_state = nullptr;
  JoinWorkersOnReturn join("fini");
}

int HandleDeviceVma(int fd, const struct stat* st) {
  if (!g_state || !st) return -ENOTSUP;
  Result<GpuFileKind> kind = g_state->backend->Classify(*st);
  if (!kind.ok()) return Fail("HANDLE_DEVICE_VMA", kind.status());
  if (*kind == GpuFileKind::kNone) return -ENOTSUP;
  AddToInventory();
  return 0;  // CRIU skips these pages: BO contents travel in our streams
}

int DumpExtFile(int fd, int id) {
  if (!g_state) return -ENOTSUP;
  struct stat st;
  Result<GpuFileKind> kind = ClassifyFd(fd, &st);
  if (!kind.ok()) return Fail("DUMP_EXT_FILE", kind.status());
  if (*kind == GpuFileKind::kNone) return -ENOTSUP;
  JoinWorkersOnReturn join("DUMP_EXT_FILE");
  AddToInventory();
  Result<const PluginContext*> ctx = Context();
  if (!ctx.ok()) return Fail("DUMP_EXT_FILE", ctx.status());
  if (*kind == GpuFileKind::kRenderNode) {
    Result<uint32_t> gpu = g_state->backend->RenderNodeGpuId(st);
    if (!gpu.ok()) return Fail("DUMP_EXT_FILE", gpu.status());
    Status s = DumpRenderNodeFile(**ctx, fd, id, *gpu, g_state->user_gpu_ids);
    if (s.ok()) g_state->written_images.insert(RenderImageName(id));
    return s.ok() ? 0 : Fail("DUMP_EXT_FILE", s);
  }
#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
  constexpr bool kUnpauseNow = false;  // DUMP_DEVICES_LATE does, after every task's memory is dumped
#else
  constexpr bool kUnpauseNow = true;
#endif
  Result<KfdDumpResult> result = DumpKfdFile(**ctx, fd, id, kUnpauseNow);
  if (!result.ok()) return Fail("DUMP_EXT_FILE", result.status());
  LogDump(**ctx, id, *result);
  g_state->written_images.insert(KfdImageName(id));
  for (const auto& [actual, user] : result->user_gpu_ids) {
    g_state->user_gpu_ids[actual] = user;
    g_state->written_images.insert(VramStreamName(id, user));
  }
  g_state->dumped_kfd_files.push_back(id);
  if (!kUnpauseNow) g_state->paused.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  return 0;
}

#ifdef VRAMFLOW_CRIU_RESTORE_EXT_FILE_RETRY
int RestoreExtFile(int id, bool* retry_needed) {
  if (retry_needed) *retry_needed = false;
#else
int RestoreExtFile(int id) {
#endif
  if (!g_state) return -ENOTSUP;
  JoinWorkersOnReturn join("RESTORE_EXT_FILE");
  Result<const PluginContext*> ctx = Context();
  if (!ctx.ok()) return Fail("RESTORE_EXT_FILE", ctx.status());
  const std::string server = g_state->parallel ? g_state->parallel->name() : std::string();
  Result<RestoreFileResult> result = RestoreFile(**ctx, id, &g_state->task, server);
  if (g_state->progress) {  // the main process waits for this in POST_FORKING
    if (!result.ok()) g_state->progress->FileFailed();
    else if (result->kfd) g_state->progress->FileDone();
  }
  if (!result.ok()) return Fail("RESTORE_EXT_FILE", result.status());
  switch (result->outcome) {
    case RestoreFileResult::Outcome::kNotOurs:
      return -ENOTSUP;
    case RestoreFileResult::Outcome::kRetry:
#ifdef VRAMFLOW_CRIU_RESTORE_EXT_FILE_RETRY
      if (retry_needed) {
        *retry_needed = true;
        return 0;
      }
#endif
      return Fail("RESTORE_EXT_FILE",
                  Status::InvalidArgument("render node file " + std::to_string(id) +
                                          " comes before its task's KFD file, whose GPU mapping it needs"));
    case RestoreFileResult::Outcome::kRestored:
      Log().Info("restored file " + std::to_string(id) + " (fd " + std::to_string(result->fd.get()) + ")");
      return result->fd.Release();
  }
  return -EINVAL;
}

int UpdateVmaMap(const char* path, const uint64_t addr, const uint64_t old_pgoff, uint64_t* new_pgoff, int* plugin_fd) {
  if (!g_state || !path || !new_pgoff || !plugin_fd) return -ENOTSUP;
  Result<std::optional<VmaUpdate>> update = UpdateVma(g_state->task, path, addr, old_pgoff);
  if (!update.ok()) return Fail("UPDATE_VMA_MAP", update.status());
  if (!update->has_value()) return -ENOTSUP;
  *new_pgoff = (*update)->new_offset;
  *plugin_fd = (*update)->fd;
  return 1;
}

int ResumeDevicesLate(int pid) {
  if (!g_state) return -ENOTSUP;
  if (g_state->parallel && g_state->parallel_started) {
    // Every task's BO contents must be in place before any queue runs.
    Status s = g_state->parallel->Finish(kParallelRestoreTimeout);
    JoinWorkersOnReturn join("RESUME_DEVICES_LATE");
    if (!s.ok()) return Fail("RESUME_DEVICES_LATE", s.WithContext("restoring BO contents in the main CRIU process"));
  }
  Result<const PluginContext*> ctx = Context();
  if (!ctx.ok()) return Fail("RESUME_DEVICES_LATE", ctx.status());
  Result<bool> resumed = ResumeProcess(**ctx, pid);
  if (!resumed.ok()) return Fail("RESUME_DEVICES_LATE", resumed.status());
  return *resumed ? 0 : -ENOTSUP;
}

#ifdef VRAMFLOW_CRIU_HAS_POST_FORKING
// Every restored task exists now: the parallel-restore worker may start.
Status StartParallelWorker() {
  PluginState& s = *g_state;
  if (!s.parallel || s.parallel_started) return Status::Ok();
  VF_ASSIGN_OR_RETURN(const PluginContext* ctx, Context());
  s.parallel_started = true;
  return s.parallel->Start([ctx](ParallelRestoreJob job) { return RunParallelRestoreJob(*ctx, std::move(job)); });
}

int PostForking() {
  if (!g_state) return 0;
  Status s = StartParallelWorker();
  if (s.ok() && g_state->parallel) {
    JoinWorkersOnReturn join("POST_FORKING");
    s = WaitForKfdFiles();
    if (s.ok())
      Log().Info("POST_FORKING: the BOs of all " + std::to_string(g_state->expected_kfd_files) +
                 " KFD files are restored");
  }
  return s.ok() ? 0 : Fail("POST_FORKING", s);
}
#endif

#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
int DumpDevicesLate(int id) {
  if (!g_state) return 0;
  Status first;
  for (UniqueFd& fd : g_state->paused) {
    Status s = g_state->backend->Kfd().Unpause(fd.get());
    if (first.ok()) first = s;
  }
  g_state->paused.clear();
  if (first.ok() && !g_state->dumped_kfd_files.empty()) {
    Result<const PluginContext*> ctx = Context();
    first = ctx.ok() ? WriteKfdFileList(*(*ctx)->images, {g_state->dumped_kfd_files, (*ctx)->dump_id}) : ctx.status();
    if (first.ok()) g_state->written_images.insert(kKfdFileListImage);
  }
  // Images of an earlier dump into the same directory that this one did not
  // replace: all of them where this dump had no GPU files.
  const int images_dir = DumpImagesDir();
  if (first.ok() && images_dir >= 0) first = RemoveEarlierDumpsImages(images_dir, g_state->written_images);
  return first.ok() ? 0 : Fail("DUMP_DEVICES_LATE", first);
}
#endif

}  // namespace
}  // namespace vramflow

extern "C" {
using namespace vramflow;
CR_PLUGIN_REGISTER(kPluginName, PluginInit, PluginFini)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, HandleDeviceVma)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, DumpExtFile)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, RestoreExtFile)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, UpdateVmaMap)
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, ResumeDevicesLate)
#ifdef VRAMFLOW_CRIU_HAS_POST_FORKING
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__POST_FORKING, PostForking)
#endif
#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, DumpDevicesLate)
#endif
}
