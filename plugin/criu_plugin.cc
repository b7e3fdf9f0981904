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

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "plugin/criu_dump.h"
#include "plugin/criu_restore.h"
#include "plugin/gpu_backend.h"
#include "plugin/image_store.h"
#include "plugin/parallel_restore.h"
#include "plugin/plugin_options.h"
#include "sim/sim_kfd_service.h"

// Everything here is hidden except the descriptor CRIU looks up by name
// (plugin/amdgpu_plugin.map exports only it).
#pragma GCC visibility push(default)
extern "C" {
#include <criu/criu-plugin.h>
}
#pragma GCC visibility pop

namespace vramflow {
namespace {

constexpr char kLog[] = "vramflow amdgpu_plugin";
// How long RESUME_DEVICES_LATE waits for the main process's BO restore.
constexpr std::chrono::hours kParallelRestoreTimeout{1};

struct PluginState {
  int stage = -1;
  PluginOptions options;
  std::unique_ptr<GpuBackend> backend;
  std::unique_ptr<ImageStore> images;       // made at first use: CRIU's images dir is open by then
  std::unique_ptr<ImageStore> vram_target;  // VRAMFLOW_TARGET, if set
  PluginContext context;
  // Dump: the process's GPUs seen so far (actual -> user gpu_id) and KFD
  // files left paused until DUMP_DEVICES_LATE.
  std::map<uint32_t, uint32_t> user_gpu_ids;
  std::vector<UniqueFd> paused;
  // Restore.
  TaskRestoreState task;
  std::unique_ptr<ParallelRestoreServer> parallel;
  bool parallel_started = false;
};

PluginState* g_state = nullptr;

int Fail(const char* hook, const Status& status) {
  std::fprintf(stderr, "%s: %s: %s\n", kLog, hook, status.ToString().c_str());
  return -(status.code() == Status::Code::kInvalidArgument ? EINVAL : EIO);
}

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
  if (stream) {
    if (!streamer) return Status::NotSupported("CRIU's image streamer is in use, but img_streamer_open is not exported");
    s.images = CriuStreamerStore(streamer, dump);
  } else {
    s.images = DirectoryStore(ImagesDirPath(dir));
  }
  if (!s.options.target.empty()) {
    VF_ASSIGN_OR_RETURN(s.vram_target, TargetStore(s.options.target, s.options.transport));
  }
  s.context.backend = s.backend.get();
  s.context.options = &s.options;
  s.context.images = s.images.get();
  s.context.vram = s.vram_target ? s.vram_target.get() : s.images.get();
  return &s.context;
}

Result<GpuFileKind> ClassifyFd(int fd, struct stat* st) {
  if (::fstat(fd, st) != 0) return Status::FromErrno("fstat of fd " + std::to_string(fd), errno);
  return g_state->backend->Classify(*st);
}

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

Status Init(int stage) {
  auto state = std::make_unique<PluginState>();
  state->stage = stage;
  VF_ASSIGN_OR_RETURN(state->options, PluginOptionsFromEnvironment(::getenv));
  if (!state->options.sim_kfd.empty()) {
    VF_ASSIGN_OR_RETURN(state->backend, ConnectSimGpuBackend(state->options.sim_kfd, state->options.topology_root));
  } else {
    state->backend = OpenAmdgpuBackend(state->options.topology_root);
  }
  if (stage == CR_PLUGIN_STAGE__RESTORE) {
    VF_ASSIGN_OR_RETURN(const bool parallel, ParallelRestoreWanted(state->options.parallel_restore));
    if (parallel) {  // only the listening socket now; connections queue until POST_FORKING
      VF_ASSIGN_OR_RETURN(state->parallel, ParallelRestoreServer::Listen(UniqueParallelRestoreName()));
    }
  }
  g_state = state.release();
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
  delete g_state;
  g_state = nullptr;
}

int HandleDeviceVma(int fd, const struct stat* st) {
  if (!g_state || !st) return -ENOTSUP;
  Result<GpuFileKind> kind = g_state->backend->Classify(*st);
  if (!kind.ok()) return Fail("HANDLE_DEVICE_VMA", kind.status());
  return *kind == GpuFileKind::kNone ? -ENOTSUP : 0;  // CRIU skips these pages: BO contents travel in our streams
}

int DumpExtFile(int fd, int id) {
  if (!g_state) return -ENOTSUP;
  struct stat st;
  Result<GpuFileKind> kind = ClassifyFd(fd, &st);
  if (!kind.ok()) return Fail("DUMP_EXT_FILE", kind.status());
  if (*kind == GpuFileKind::kNone) return -ENOTSUP;
  Result<const PluginContext*> ctx = Context();
  if (!ctx.ok()) return Fail("DUMP_EXT_FILE", ctx.status());
  if (*kind == GpuFileKind::kRenderNode) {
    Result<uint32_t> gpu = g_state->backend->RenderNodeGpuId(st);
    if (!gpu.ok()) return Fail("DUMP_EXT_FILE", gpu.status());
    Status s = DumpRenderNodeFile(**ctx, id, *gpu, g_state->user_gpu_ids);
    return s.ok() ? 0 : Fail("DUMP_EXT_FILE", s);
  }
#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
  constexpr bool kUnpauseNow = false;  // DUMP_DEVICES_LATE does, after every task's memory is dumped
#else
  constexpr bool kUnpauseNow = true;
#endif
  Result<KfdDumpResult> result = DumpKfdFile(**ctx, fd, id, kUnpauseNow);
  if (!result.ok()) return Fail("DUMP_EXT_FILE", result.status());
  for (const auto& [actual, user] : result->user_gpu_ids) g_state->user_gpu_ids[actual] = user;
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
  Result<const PluginContext*> ctx = Context();
  if (!ctx.ok()) return Fail("RESTORE_EXT_FILE", ctx.status());
  const std::string server = g_state->parallel ? g_state->parallel->name() : std::string();
  Result<RestoreFileResult> result = RestoreFile(**ctx, id, &g_state->task, server);
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
      return result->fd.Release();
  }
  return -EINVAL;
}

int UpdateVmaMap(const char* path, const uint64_t addr, const uint64_t old_pgoff, uint64_t* new_pgoff,
                 int* plugin_fd) {
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
  return first.ok() ? 0 : Fail("DUMP_DEVICES_LATE", first);
}
#endif

}  // namespace
}  // namespace vramflow

extern "C" {
using namespace vramflow;
CR_PLUGIN_REGISTER("amdgpu_plugin", PluginInit, PluginFini)
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
