// SPDX-License-Identifier: MIT
// vramflow-criu-host: plays CRIU for amdgpu_plugin.so, on simulated GPUs.
//
// It dlopens the built plugin and drives its hooks in the order and from
// the processes CRIU uses (/work/shared/context/criu-amdgpu.md, sections 1-3):
//
//   dump     a "criu dump" process: init(DUMP); HANDLE_DEVICE_VMA for each
//            device mapping; DUMP_EXT_FILE for every KFD and render-node
//            file of every task (and a plain file, which must be refused);
//            DUMP_DEVICES_LATE where this CRIU has it; fini.
//   restore  a "criu restore" main process: init(RESTORE); forks one
//            restored task per checkpointed process, each restoring its
//            fd table as CRIU does (sim/criu/criu_task_fds.h: its own fds
//            moved to the top, the rest closed, the task's fds restored at
//            their dumped numbers in ascending order, RESTORE_EXT_FILE for
//            its KFD and render-node files, retried when it asks,
//            find_unused_fd_pid for the plugin), then UPDATE_VMA_MAP for
//            its device mappings; POST_FORKING where this CRIU has it;
//            RESUME_DEVICES_LATE per task once all tasks are restored; fini.
//
// Behind the plugin is a simulated KFD (sim/kfd/sim_kfd.h) for the checkpointed
// machine and another for the restoring one, each served to every process
// over a UNIX socket (sim/kfd/sim_kfd_service.h) the way the kernel serves
// /dev/kfd, with its topology written as a sysfs tree. This process owns
// both machines: it builds the checkpointed processes with model-like BO
// contents, and after the restore checks every restored BO byte for byte,
// its new mmap offset against UPDATE_VMA_MAP's answer, that each task's
// KFD and render-node fds are the files KFD restored it with (a render node
// must be the DRM file KFD's restore was given: KFD grants mmap rights per
// DRM file), and that KFD resumed exactly the processes it should have.
//
// The dump and the restore main process are programs of their own, as CRIU
// is: this binary executed again with --role (see RunCriuProcess), not a
// copy of this multi-threaded process. The restore main process forks its
// tasks while it has a single thread, as CRIU does.
//
// Exit status: 0 when everything the run expected happened, 1 otherwise,
// with the reason on stderr.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/endian.h"
#include "common/units.h"
#include "datagen/model_data.h"
#include "plugin/kfd_image.h"
#include "sim/criu/criu_streamer_protocol.h"
#include "sim/criu/criu_task_fds.h"
#include "sim/kfd/sim_kfd.h"
#include "sim/kfd/sim_kfd_service.h"
#include "streamer/format/amdgpu_pages.h"

extern "C" {
#include <criu/criu-plugin.h>
}

// What CRIU exports to its plugins (the plugin looks them up at run time).
static int g_image_dir = -1;
static vramflow::CriuStreamerClient* g_streamer = nullptr;  // with --stream
extern "C" __attribute__((visibility("default"))) int criu_get_image_dir(void) { return g_image_dir; }
extern "C" __attribute__((visibility("default"))) int img_streamer_open(char* filename, int flags) {
  return g_streamer ? g_streamer->Open(filename) : -1;
}
// CRIU's log: the restore process's stderr, a service fd in a restored task.
static int g_log_fd = STDERR_FILENO;
// In a restored task, while its fds are restored: the lowest fd number above
// those still to be restored (CRIU looks the task up by pid; a task here
// knows only itself). The plugin asks about its own pid, and about the pid
// a KFD image names when that is another that exists: CRIU's "Invalid pid"
// for a pid it does not restore (tasks here do not get their dumped pids).
static vramflow::TaskFdRestore* g_task_fds = nullptr;
extern "C" __attribute__((visibility("default"))) int find_unused_fd_pid(pid_t pid) {
  if (!g_task_fds || pid != ::getpid()) {
    ::dprintf(g_log_fd, "criu (host): find_unused_fd_pid: Invalid pid:%d\n", pid);
    return -1;
  }
  return g_task_fds->FindUnusedFd();
}
// CRIU's log: errors and warnings (CRIU's default -v2) go to the log fd.
extern "C" __attribute__((visibility("default"))) void print_on_level(unsigned int loglevel, const char* format, ...) {
  constexpr unsigned kLogWarn = 2;
  if (loglevel > kLogWarn) return;
  va_list args;
  va_start(args, format);
  ::vdprintf(g_log_fd, format, args);
  va_end(args);
}
// CRIU 4.1+'s inventory of the plugins a dump needs: a dump adds them
// (add_inventory_plugin), the restore reads them back, each plugin claims
// its entry at init (check_and_remove_inventory_plugin), and one left
// unclaimed fails the restore. Without the list (an inventory from CRIU
// before 4.1) every plugin's claim succeeds.
static std::vector<std::string> g_inventory_plugins;
static bool g_inventory_lists_plugins = true;
extern "C" __attribute__((visibility("default"))) int add_inventory_plugin(const char* name) {
  g_inventory_plugins.emplace_back(name);
  return 0;
}
extern "C" __attribute__((visibility("default"))) bool check_and_remove_inventory_plugin(const char* name, size_t n) {
  if (!g_inventory_lists_plugins) return true;
  for (auto it = g_inventory_plugins.begin(); it != g_inventory_plugins.end(); ++it) {
    if (std::strncmp(name, it->c_str(), n) == 0) {
      g_inventory_plugins.erase(it);
      return true;
    }
  }
  return false;
}

namespace vramflow {
namespace {

namespace fs = std::filesystem;

// Hooks newer than some criu-plugin.h headers, by their number in CRIU's
// enum (a plugin built for a newer CRIU fills these slots).
constexpr unsigned kHookPostForking = 12;      // CRIU 4.2+
constexpr unsigned kHookDumpDevicesLate = 14;  // criu-dev after 4.2

struct HostOptions {
  std::string plugin;
  std::string work;  // images/, topology trees and sockets go here
  uint32_t gpus = 2;
  uint32_t procs = 1;
  uint64_t bytes_per_gpu = 32ull << 20;
  uint32_t restore_first_gpu_id = 0;  // 0: as the checkpointed machine's
  uint32_t restore_gpus = 0;          // 0: as many as the checkpointed machine
  bool legacy_pages = false;          // replace our streams by upstream's raw pages images before restoring
  bool corrupt_stream = false;        // flip one byte in a VRAM stream before restoring
  bool truncate_stream = false;       // cut a VRAM stream short before restoring
  bool expect_restore_failure = false;
  bool stream = false;  // CRIU --stream: every image through an image streamer
  // Each task's fd table: stdio at 0-2, then "kfd-first" (the KFD file at 3,
  // its render nodes after, as the ROCm runtime opens them) or
  // "render-first" (render nodes, then the KFD file); two regular files last.
  std::string fd_layout = "kfd-first";
  std::string restore_target;  // VRAMFLOW_TARGET for the restore only (a migration's other end)
  // An incremental checkpoint: a full dump (kept in WORK/base-images), a
  // change to the BOs (ChangeBos), then the dump that is restored, with
  // VRAMFLOW_BASE=WORK/base-images.
  bool incremental = false;
  // VRAMFLOW_BASE for the restore: "(as dumped)" keeps the dump's, "none"
  // unsets it, anything else replaces it (a wrong or missing base).
  std::string restore_base = "(as dumped)";
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "vramflow-criu-host: %s\n", what.c_str());
  return 1;
}

// A device mapping of a checkpointed task, as CRIU's VMA list has it.
struct Vma {
  std::string path;
  uint64_t addr = 0;
  uint64_t offset = 0;
};

struct Task {
  pid_t pid = 0;   // its pid on the checkpointed machine
  int kfd_id = 0;  // CRIU file ids
  std::vector<int> render_ids;
  std::vector<Vma> vmas;
  std::vector<TaskFd> fds;  // its fd table, as CRIU restores it
  // Dump only: the fds of its KFD file, then of its render nodes, as the
  // parasite drained them into the dumper (which inherits them).
  std::vector<int> files;
};

// The plugin, loaded and checked as criu/plugin.c does.
struct Plugin {
  void* handle = nullptr;
  cr_plugin_desc_t* desc = nullptr;

  // The hook in slot `hook`, if this plugin fills it. Slots past this
  // header's CR_PLUGIN_HOOK__MAX (hooks of newer CRIUs) are never filled:
  // LoadPlugin refuses descriptors with more.
  template <typename Fn>
  Fn Hook(unsigned hook) const {
    std::span<void* const> hooks(desc->hooks, CR_PLUGIN_HOOK__MAX);
    return hook < desc->max_hooks && hook < hooks.size() ? reinterpret_cast<Fn>(hooks[hook]) : nullptr;
  }
};

Result<Plugin> LoadPlugin(const std::string& path) {
  Plugin p;
  p.handle = ::dlopen(path.c_str(), RTLD_LAZY);
  if (!p.handle) return Status::IoError("dlopen " + path + ": " + ::dlerror());
  p.desc = static_cast<cr_plugin_desc_t*>(::dlsym(p.handle, "CR_PLUGIN_DESC"));
  if (!p.desc) return Status::InvalidArgument(path + " has no CR_PLUGIN_DESC");
  if (p.desc->version > CRIU_PLUGIN_VERSION || p.desc->max_hooks > CR_PLUGIN_HOOK__MAX)
    return Status::InvalidArgument(path + ": plugin ABI newer than this CRIU's");
  if (std::strcmp(p.desc->name, "amdgpu_plugin") != 0)
    return Status::InvalidArgument(path + " registers as '" + p.desc->name + "', not amdgpu_plugin");
  return p;
}

uint32_t Minor(const SimKfd& kfd, uint32_t gpu_id) {
  Result<Topology> t = kfd.MachineTopology();
  const KfdNode* n = t.ok() ? t->FindGpu(gpu_id) : nullptr;
  return n ? n->drm_render_minor : 0;
}

// Task `index`'s fd table (HostOptions::fd_layout): stdio inherited from
// the restore process, its KFD and render-node files, two regular files.
std::vector<TaskFd> TaskFds(const HostOptions& o, const Task& t, uint32_t index) {
  std::vector<TaskFd> fds;
  auto add = [&fds](TaskFd::Kind kind) -> TaskFd& {
    TaskFd& f = fds.emplace_back();
    f.fd = static_cast<int>(fds.size()) - 1;
    f.kind = kind;
    return f;
  };
  for (int fd = 0; fd < 3; ++fd) add(TaskFd::Kind::kInherit).inherited = fd;
  if (o.fd_layout == "kfd-first") add(TaskFd::Kind::kExt).ext_id = t.kfd_id;
  for (int id : t.render_ids) add(TaskFd::Kind::kExt).ext_id = id;
  if (o.fd_layout == "render-first") add(TaskFd::Kind::kExt).ext_id = t.kfd_id;
  for (const char* name : {"log", "data"})
    add(TaskFd::Kind::kFile).path = o.work + "/task-" + std::to_string(index) + "-" + name;
  return fds;
}

// The checkpointed processes: per GPU, model-like VRAM BOs (weights
// replicated on every GPU, optimizer state, a zero-filled pool, an unaligned
// size), a GTT BO, and a doorbell page (no contents).
Status BuildProcesses(SimKfd& kfd, const HostOptions& o, std::vector<Task>* tasks) {
  const std::vector<uint32_t> gpus = kfd.GpuIds();
  for (uint32_t p = 0; p < o.procs; ++p) {
    Task task;
    task.pid = static_cast<pid_t>(4190000 + p);
    std::vector<SimKfdBoSpec> specs;
    struct Fill {
      DataKind kind;
      uint64_t seed;
    };
    std::vector<Fill> fills;
    uint64_t va = 0x7f0000000000ull + (uint64_t{p} << 36);
    auto add = [&](uint32_t flags, uint32_t gpu, uint64_t size, DataKind kind, uint64_t seed) {
      specs.push_back(SimKfdBoSpec{va, size, flags, gpu});
      fills.push_back({kind, seed});
      va += (size + 0x1fffff) & ~uint64_t{0x1fffff};
    };
    for (size_t g = 0; g < gpus.size(); ++g) {
      const uint64_t unit = std::max<uint64_t>(o.bytes_per_gpu / 8, 4096) & ~uint64_t{4095};
      add(kKfdBoVram, gpus[g], 3 * unit, DataKind::kBf16Weights, 100 + p);  // replicated on every GPU
      add(kKfdBoVram, gpus[g], 2 * unit, DataKind::kAdamM, 200 + g);
      add(kKfdBoVram, gpus[g], 2 * unit, DataKind::kZeros, 0);
      add(kKfdBoVram, gpus[g], unit + 4096 * 3 + 4096, DataKind::kFp32Weights, 300 + g);
      add(kKfdBoGtt, gpus[g], 64 * 4096, DataKind::kRandom, 400 + g);
      add(kKfdBoDoorbell, gpus[g], 4096, DataKind::kZeros, 0);
    }
    VF_RETURN_IF_ERROR(kfd.AddProcess(task.pid, specs));
    VF_ASSIGN_OR_RETURN(std::vector<SimKfdBoInfo> bos, kfd.Bos(task.pid));
    for (size_t i = 0; i < bos.size(); ++i) {
      if (KfdBoHasContents(bos[i].alloc_flags) && fills[i].kind != DataKind::kZeros) {
        VF_ASSIGN_OR_RETURN(std::span<uint8_t> bytes, kfd.BoBytes(task.pid, i));
        GenerateModelData(fills[i].kind, fills[i].seed, 0, bytes);
      }
      const bool render = KfdBoHasContents(bos[i].alloc_flags);
      task.vmas.push_back(Vma{render ? "/dev/dri/renderD" + std::to_string(Minor(kfd, bos[i].gpu_id)) : "/dev/kfd",
                              bos[i].addr, bos[i].offset});
    }
    task.kfd_id = static_cast<int>(100 * (p + 1));
    for (size_t g = 0; g < gpus.size(); ++g) task.render_ids.push_back(task.kfd_id + 1 + static_cast<int>(g));
    task.fds = TaskFds(o, task, p);
    tasks->push_back(std::move(task));
  }
  return Status::Ok();
}

// ---- the CRIU processes ------------------------------------------------------
//
// The dump and the restore main process are this binary run again with
// --role, the tasks in a file of the work directory. This process has
// threads (the KFD servers, the image streamer): a child forked from it gets
// a copy of their locks in whatever state they were, and may only make
// async-signal-safe calls until it execs. (Under ASan a child that
// allocated instead hung, now and then, on the sanitizer's allocator lock.)

std::string ImagesDir(const HostOptions& o) { return o.work + "/images"; }
std::string TasksPath(const HostOptions& o, const std::string& role) { return o.work + "/" + role + "-tasks.txt"; }
std::string ReportPath(const HostOptions& o) { return o.work + "/restore-report.txt"; }
// The inventory's plugin list, a name per line (kept beside the images, not
// among them: under --stream the images directory must stay empty).
std::string InventoryPath(const HostOptions& o) { return o.work + "/inventory-plugins.txt"; }

Status WriteInventory(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& name : g_inventory_plugins) out << name << '\n';
  out.close();
  return out ? Status::Ok() : Status::IoError("writing " + path);
}

// The dump's plugin list; none (every plugin runs) when there is no file.
Status ReadInventory(const std::string& path) {
  std::ifstream in(path);
  g_inventory_lists_plugins = static_cast<bool>(in);
  g_inventory_plugins.clear();
  for (std::string name; std::getline(in, name);) g_inventory_plugins.push_back(name);
  return in.bad() ? Status::IoError("reading " + path) : Status::Ok();
}

// The tasks file, a line per item:
//   task PID KFD_ID RENDER_ID...
//   vma ADDR OFFSET PATH     (a device mapping of the task above)
//   fd FD ext ID | fd FD file PATH | fd FD inherit FD   (its fd table)
//   file FD                  (dump only: one of its files, in order)
Status WriteTasks(const std::string& path, const std::vector<Task>& tasks) {
  std::ofstream out(path, std::ios::trunc);
  for (const Task& t : tasks) {
    out << "task " << t.pid << ' ' << t.kfd_id;
    for (int id : t.render_ids) out << ' ' << id;
    out << '\n';
    for (const Vma& v : t.vmas) out << "vma " << v.addr << ' ' << v.offset << ' ' << v.path << '\n';
    for (const TaskFd& f : t.fds) {
      out << "fd " << f.fd << ' ';
      switch (f.kind) {
        case TaskFd::Kind::kExt:
          out << "ext " << f.ext_id << '\n';
          break;
        case TaskFd::Kind::kFile:
          out << "file " << f.path << '\n';
          break;
        case TaskFd::Kind::kInherit:
          out << "inherit " << f.inherited << '\n';
          break;
      }
    }
    for (int fd : t.files) out << "file " << fd << '\n';
  }
  out.close();
  return out ? Status::Ok() : Status::IoError("writing " + path);
}

Result<std::vector<Task>> ReadTasks(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IoError("cannot open the tasks file " + path);
  std::vector<Task> tasks;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "task") {
      Task t;
      if (!(fields >> t.pid >> t.kfd_id)) kind.clear();
      for (int id; fields >> id;) t.render_ids.push_back(id);
      if (!fields.eof()) kind.clear();
      tasks.push_back(std::move(t));
    } else if (kind == "vma" && !tasks.empty()) {
      Vma v;
      if (!(fields >> v.addr >> v.offset >> v.path)) kind.clear();
      tasks.back().vmas.push_back(std::move(v));
    } else if (kind == "fd" && !tasks.empty()) {
      TaskFd f;
      std::string what;
      fields >> f.fd >> what;
      if (what == "ext") {
        f.kind = TaskFd::Kind::kExt;
        fields >> f.ext_id;
      } else if (what == "file") {
        f.kind = TaskFd::Kind::kFile;
        fields >> f.path;
      } else if (what == "inherit") {
        f.kind = TaskFd::Kind::kInherit;
        fields >> f.inherited;
      } else {
        kind.clear();
      }
      if (!fields || f.fd < 0) kind.clear();
      tasks.back().fds.push_back(std::move(f));
    } else if (kind == "file" && !tasks.empty()) {
      int fd = -1;
      if (!(fields >> fd)) kind.clear();
      tasks.back().files.push_back(fd);
    } else {
      kind.clear();
    }
    if (kind.empty()) return Status::Corruption(path + ":" + std::to_string(n) + ": bad line '" + line + "'");
  }
  return tasks;
}

int WaitExitStatus(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Fail(std::string("waitpid: ") + std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs this binary as the CRIU process `role` (its tasks file written) and
// returns its exit status (0 = success). Of this process's fds, only those
// in `inherited` stay open in it, under the same numbers.
int RunCriuProcess(const HostOptions& o, const std::string& role, const std::vector<UniqueFd>& inherited) {
  std::vector<std::string> args = {"vramflow-criu-host", "--role", role, "--plugin", o.plugin, "--work", o.work};
  if (o.stream) args.push_back("--stream");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Async-signal-safe calls only, up to exec.
    for (const UniqueFd& fd : inherited) ::fcntl(fd.get(), F_SETFD, 0);
    ::execve("/proc/self/exe", argv.data(), environ);
    static constexpr char kExecFailed[] = "vramflow-criu-host: cannot exec /proc/self/exe\n";
    (void)!::write(STDERR_FILENO, kExecFailed, sizeof kExecFailed - 1);
    ::_exit(127);
  }
  return WaitExitStatus(pid);
}

// The threads of this process (its /proc/self/task entries).
size_t ThreadCount() {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// How many more threads than `threads` the process runs, once those on
// their way out are gone: a thread the plugin joined can stay listed in
// /proc for a moment (pthread_join returns when the kernel clears the
// thread's id, before the exiting task is reaped), running no plugin code
// any more. Waits up to a second for the count to come down.
size_t ThreadsLeftAbove(size_t threads) {
  for (int waited_ms = 0;; ++waited_ms) {
    const size_t now = ThreadCount();
    if (now <= threads || waited_ms >= 1000) return now > threads ? now - threads : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int OpenImagesDir(const std::string& dir) {
  g_image_dir = ::open(dir.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  return g_image_dir;
}

// With --stream, connects to the image streamer as CRIU's open_image_dir()
// does and makes it what img_streamer_open() uses; null without --stream.
Result<std::unique_ptr<CriuStreamerClient>> ConnectStreamer(const HostOptions& o, const std::string& images,
                                                            bool dump) {
  if (!o.stream) return std::unique_ptr<CriuStreamerClient>();
  VF_ASSIGN_OR_RETURN(std::unique_ptr<CriuStreamerClient> client, CriuStreamerClient::Connect(images, dump));
  g_streamer = client.get();
  return client;
}

// ---- criu dump -------------------------------------------------------------

// The "criu dump" process (--role dump).
int DumpMain(const HostOptions& o, const std::vector<Task>& tasks) {
  for (const Task& t : tasks) {
    if (t.files.size() != 1 + t.render_ids.size())
      return Fail("dump: task " + std::to_string(t.pid) + " has " + std::to_string(t.files.size()) + " files for " +
                  std::to_string(1 + t.render_ids.size()) + " file ids");
  }
  const std::string images = ImagesDir(o);
  if (OpenImagesDir(images) < 0) return Fail("cannot open " + images);
  Result<std::unique_ptr<CriuStreamerClient>> streamer = ConnectStreamer(o, images, /*dump=*/true);
  if (!streamer.ok()) return Fail(streamer.status().ToString());
  Result<Plugin> plugin = LoadPlugin(o.plugin);
  if (!plugin.ok()) return Fail(plugin.status().ToString());
  const cr_plugin_desc_t* d = plugin->desc;
  if (d->init(CR_PLUGIN_STAGE__DUMP) != 0) return Fail("dump: init failed");
  int ret = 0;
  auto vma_hook = plugin->Hook<int (*)(int, const struct stat*)>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA);
  auto dump_file = plugin->Hook<int (*)(int, int)>(CR_PLUGIN_HOOK__DUMP_EXT_FILE);
  // A plain file is not the plugin's.
  UniqueFd plain(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  struct stat st;
  ::fstat(plain.get(), &st);
  if (vma_hook(plain.get(), &st) != -ENOTSUP || dump_file(plain.get(), 99) != -ENOTSUP)
    ret = Fail("dump: the plugin claimed a plain file");
  for (size_t t = 0; t < tasks.size() && ret == 0; ++t) {
    const std::vector<int>& files = tasks[t].files;
    for (int f : files) {
      ::fstat(f, &st);
      if (vma_hook(f, &st) != 0) ret = Fail("dump: HANDLE_DEVICE_VMA refused a GPU mapping");
    }
    // The KFD file first, then render nodes, as the runtime opened them.
    for (size_t i = 0; i < files.size() && ret == 0; ++i) {
      const int id = i == 0 ? tasks[t].kfd_id : tasks[t].render_ids[i - 1];
      const size_t threads = ThreadCount();
      const int r = dump_file(files[i], id);
      if (r != 0) ret = Fail("dump: DUMP_EXT_FILE(" + std::to_string(id) + ") returned " + std::to_string(r));
      if (const size_t left = ThreadsLeftAbove(threads); left > 0)
        ret = Fail("dump: DUMP_EXT_FILE(" + std::to_string(id) + ") left " + std::to_string(left) +
                   " threads running (CRIU unmaps the plugin under them at fini)");
    }
  }
  if (auto late = plugin->Hook<int (*)(int)>(kHookDumpDevicesLate); ret == 0 && late) {
    if (late(tasks[0].pid) != 0) ret = Fail("dump: DUMP_DEVICES_LATE failed");
  }
  d->exit(CR_PLUGIN_STAGE__DUMP, ret);
  if (ret == 0) {
    Status s = WriteInventory(InventoryPath(o));
    if (!s.ok()) ret = Fail(s.ToString());
  }
  return ret;
}

// Opens the target's files, as the parasite drains them into the dumper,
// and runs the dump process, which inherits them.
int RunDump(const HostOptions& o, SimKfd& kfd, std::vector<Task> tasks) {
  std::vector<UniqueFd> open;
  for (Task& t : tasks) {
    std::vector<Result<UniqueFd>> files;
    files.push_back(kfd.OpenKfd(t.pid));
    for (uint32_t gpu : kfd.GpuIds()) files.push_back(kfd.OpenRenderNode(gpu));
    for (Result<UniqueFd>& f : files) {
      if (!f.ok()) return Fail(f.status().ToString());
      t.files.push_back(f->get());
      open.push_back(std::move(*f));
    }
  }
  Status written = WriteTasks(TasksPath(o, "dump"), tasks);
  if (!written.ok()) return Fail(written.ToString());
  return RunCriuProcess(o, "dump", open);
}

// ---- between dump and restore ----------------------------------------------

std::string BaseImagesDir(const HostOptions& o) { return o.work + "/base-images"; }

// What changes between the two dumps of --incremental, as a training step
// would change it (BuildProcesses' layout, six BOs per GPU): every fourth
// word of each Adam-moment BO in its low bits (a delta against the base),
// the GTT BO rewritten (new bytes); the rest stays (references).
Status ChangeBos(SimKfd& kfd, const std::vector<Task>& tasks) {
  for (const Task& t : tasks) {
    VF_ASSIGN_OR_RETURN(std::vector<SimKfdBoInfo> bos, kfd.Bos(t.pid));
    for (size_t i = 0; i < bos.size(); ++i) {
      if (!KfdBoHasContents(bos[i].alloc_flags)) continue;
      VF_ASSIGN_OR_RETURN(std::span<uint8_t> bytes, kfd.BoBytes(t.pid, i));
      if (i % 6 == 1) {
        for (size_t w = 0; w + 4 <= bytes.size(); w += 16) bytes[w] ^= static_cast<uint8_t>(1 + (w >> 4) % 255);
      } else if (i % 6 == 4) {
        GenerateModelData(DataKind::kRandom, 999 + i, 0, bytes);
      }
    }
  }
  return Status::Ok();
}

uint64_t VramStreamBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().starts_with("amdgpu-vram-")) bytes += entry.file_size();
  return bytes;
}

// Rewrites every VRAM stream as upstream's raw pages image.
Status WriteLegacyPages(SimKfd& kfd, const std::vector<Task>& tasks, const std::string& images) {
  for (const Task& t : tasks) {
    VF_ASSIGN_OR_RETURN(std::vector<SimKfdBoInfo> bos, kfd.Bos(t.pid));
    for (uint32_t gpu : kfd.GpuIds()) {
      std::vector<uint8_t> file(kAmdgpuPagesHeaderSize);
      for (size_t i = 0; i < bos.size(); ++i) {
        if (bos[i].gpu_id != gpu || !KfdBoHasContents(bos[i].alloc_flags)) continue;
        VF_ASSIGN_OR_RETURN(std::span<uint8_t> bytes, kfd.BoBytes(t.pid, i));
        file.insert(file.end(), bytes.begin(), bytes.end());
      }
      EncodeAmdgpuPagesHeader(file.size() - kAmdgpuPagesHeaderSize, HostIsLittleEndian(), file.data());
      const std::string path = images + "/" + PagesImageName(t.kfd_id, gpu);
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f || std::fwrite(file.data(), 1, file.size(), f) != file.size() || std::fclose(f) != 0)
        return Status::IoError("writing " + path);
      fs::remove(images + "/" + VramStreamName(t.kfd_id, gpu));
    }
  }
  return Status::Ok();
}

Status DamageStream(const Task& t, uint32_t gpu, const std::string& images, bool truncate) {
  const std::string path = images + "/" + VramStreamName(t.kfd_id, gpu);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::IoError("no stream " + path + " to damage");
  if (truncate) {
    fs::resize_file(path, size / 2, ec);
    return ec ? Status::IoError("truncating " + path) : Status::Ok();
  }
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  uint8_t b = 0;
  const off_t at = static_cast<off_t>(size / 2);
  if (!fd.valid() || ::pread(fd.get(), &b, 1, at) != 1) return Status::IoError("reading " + path);
  b ^= 0x40;
  if (::pwrite(fd.get(), &b, 1, at) != 1) return Status::IoError("writing " + path);
  return Status::Ok();
}

// ---- criu restore ----------------------------------------------------------

// One restored task's report to the restore main process: its pid, the new
// offset UPDATE_VMA_MAP gave for each device mapping, and which file the
// task holds at the number of each of its KFD and render-node files.
struct InstalledFile {
  uint64_t fd = 0;
  uint64_t dev = 0;  // st_dev and st_ino; 0 when nothing is open there
  uint64_t ino = 0;
};
struct TaskReport {
  int32_t pid = 0;
  int32_t ok = 0;
  int32_t task = 0;  // index into the checkpointed tasks
  std::vector<uint64_t> new_offsets;
  std::vector<InstalledFile> files;
};
constexpr size_t kReportHeaderSize = 5 * sizeof(int32_t);  // pid, ok, task, offsets, files

// A restored task's complaint, into CRIU's log (the task's own stderr may
// not be restored yet).
void TaskLog(const std::string& what) {
  ::dprintf(g_log_fd, "vramflow-criu-host: task %d: %s\n", ::getpid(), what.c_str());
}

// CRIU's restore of the task's fd table (sim/criu/criu_task_fds.h): its own fds
// move to the top, the rest are closed, the task's files are installed at
// their numbers, the plugin's through RESTORE_EXT_FILE.
Status RestoreTaskFds(const Plugin& plugin, const Task& task, std::span<int* const> service) {
  auto restore_file = reinterpret_cast<int (*)(int, bool*)>(plugin.desc->hooks[CR_PLUGIN_HOOK__RESTORE_EXT_FILE]);
  TaskFdRestore fds(task.fds);
  int streamer_fd = g_streamer ? g_streamer->fd() : -1;
  std::vector<int*> moving(service.begin(), service.end());
  moving.push_back(&streamer_fd);
  moving.push_back(&g_image_dir);
  moving.push_back(&g_log_fd);
  VF_RETURN_IF_ERROR(fds.MoveServiceFdsAndCloseTheRest(moving));
  if (g_streamer) g_streamer->MovedTo(streamer_fd);
  g_task_fds = &fds;
  Status restored = fds.Restore([&](int id) -> Result<ExtFileOpen> {
    // CRIUs before 4.2 call RESTORE_EXT_FILE(id) only; passing the pointer
    // to such a hook is harmless in the C calling convention.
    bool retry = false;
    const size_t threads = ThreadCount();
    const int fd = restore_file(id, &retry);
    if (fd < 0) return Status::IoError("RESTORE_EXT_FILE(" + std::to_string(id) + ") returned " + std::to_string(fd));
    if (const size_t left = ThreadsLeftAbove(threads); left > 0)
      return Status::Internal("RESTORE_EXT_FILE(" + std::to_string(id) + ") left " + std::to_string(left) +
                              " threads running in the task (CRIU's restorer replaces the memory they run in)");
    return ExtFileOpen{fd, retry};
  });
  g_task_fds = nullptr;
  return restored;
}

int RestoreTask(const Plugin& plugin, const Task& task, int32_t index, int report_fd, int go_fd) {
  auto restore_file = reinterpret_cast<int (*)(int, bool*)>(plugin.desc->hooks[CR_PLUGIN_HOOK__RESTORE_EXT_FILE]);
  auto update_vma =
      plugin.Hook<int (*)(const char*, uint64_t, uint64_t, uint64_t*, int*)>(CR_PLUGIN_HOOK__UPDATE_VMA_MAP);
  int ok = 1;
  Status fds = RestoreTaskFds(plugin, task, std::array<int*, 2>{&report_fd, &go_fd});
  if (!fds.ok()) {
    TaskLog(fds.ToString());
    ok = 0;
  }
  if (ok && restore_file(999999, nullptr) != -ENOTSUP) {
    TaskLog("RESTORE_EXT_FILE claimed a file id that is not the plugin's");
    ok = 0;
  }
  std::vector<uint64_t> offsets;
  for (const Vma& vma : task.vmas) {
    if (!ok) break;
    uint64_t new_offset = 0;
    int fd = -1;
    const int r = update_vma(vma.path.c_str(), vma.addr, vma.offset, &new_offset, &fd);
    const bool render = vma.path.find("renderD") != std::string::npos;
    if (r != 1 || (render && fd < 0) || (!render && fd >= 0)) {
      char addr[24];
      std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(vma.addr));
      TaskLog("UPDATE_VMA_MAP(" + vma.path + ", " + addr + ") returned " + std::to_string(r) + ", fd " +
              std::to_string(fd));
      ok = 0;
    }
    if (fd >= 0) ::close(fd);
    offsets.push_back(new_offset);
  }
  std::vector<InstalledFile> files;
  for (const TaskFd& f : task.fds) {
    if (f.kind != TaskFd::Kind::kExt) continue;
    struct stat st {};
    InstalledFile file{static_cast<uint64_t>(f.fd)};
    if (::fstat(f.fd, &st) == 0) file = {static_cast<uint64_t>(f.fd), st.st_dev, st.st_ino};
    files.push_back(file);
  }
  // Every task reports into one pipe: the report goes in one write of at
  // most PIPE_BUF bytes, which the kernel keeps whole, so reports of tasks
  // restored at the same time never interleave.
  const int32_t header[5] = {static_cast<int32_t>(::getpid()), ok, index, static_cast<int32_t>(offsets.size()),
                             static_cast<int32_t>(files.size())};
  static_assert(sizeof header == kReportHeaderSize);
  std::vector<uint8_t> report(sizeof header + offsets.size() * sizeof(uint64_t) + files.size() * sizeof(InstalledFile));
  if (report.size() > PIPE_BUF) {
    TaskLog(std::to_string(offsets.size()) + " mappings and " + std::to_string(files.size()) +
            " files do not fit one report");
    return 1;
  }
  uint8_t* at = report.data();
  std::memcpy(at, header, sizeof header);
  at += sizeof header;
  if (!offsets.empty()) std::memcpy(at, offsets.data(), offsets.size() * sizeof(uint64_t));
  at += offsets.size() * sizeof(uint64_t);
  if (!files.empty()) std::memcpy(at, files.data(), files.size() * sizeof(InstalledFile));
  if (::write(report_fd, report.data(), report.size()) != static_cast<ssize_t>(report.size())) return 1;
  // The task goes on running until CRIU lets it go.
  char c;
  while (::read(go_fd, &c, 1) < 0 && errno == EINTR) {
  }
  return ok ? 0 : 1;
}

// The report file the restore main process leaves for the host, per task:
//   task PID INDEX
//   offset NEW_OFFSET          (per device mapping, in order)
//   file FD ST_DEV ST_INO      (per KFD and render-node file)
Status WriteRestoreReport(const std::string& path, const std::vector<TaskReport>& reports) {
  std::ofstream out(path, std::ios::trunc);
  for (const TaskReport& r : reports) {
    out << "task " << r.pid << ' ' << r.task << '\n';
    for (uint64_t off : r.new_offsets) out << "offset " << off << '\n';
    for (const InstalledFile& f : r.files) out << "file " << f.fd << ' ' << f.dev << ' ' << f.ino << '\n';
  }
  out.close();
  return out ? Status::Ok() : Status::IoError("writing " + path);
}

Result<std::vector<TaskReport>> ReadRestoreReport(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IoError("no report from the restore (" + path + ")");
  std::vector<TaskReport> reports;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    bool good = true;
    if (kind == "task") {
      TaskReport r;
      good = static_cast<bool>(fields >> r.pid >> r.task);
      reports.push_back(std::move(r));
    } else if (kind == "offset" && !reports.empty()) {
      uint64_t off = 0;
      good = static_cast<bool>(fields >> off);
      reports.back().new_offsets.push_back(off);
    } else if (kind == "file" && !reports.empty()) {
      InstalledFile f;
      good = static_cast<bool>(fields >> f.fd >> f.dev >> f.ino);
      reports.back().files.push_back(f);
    } else {
      good = false;
    }
    if (!good) return Status::Corruption(path + ":" + std::to_string(n) + ": bad line '" + line + "'");
  }
  return reports;
}

// The "criu restore" main process (--role restore). Writes the restore
// report (WriteRestoreReport) for the host to check.
int RestoreMain(const HostOptions& o, const std::vector<Task>& tasks) {
  const std::string images = ImagesDir(o), report_path = ReportPath(o);
  if (OpenImagesDir(images) < 0) return Fail("cannot open " + images);
  // With --stream, one connection shared by every restored task, as CRIU's service fd is.
  Result<std::unique_ptr<CriuStreamerClient>> streamer = ConnectStreamer(o, images, /*dump=*/false);
  if (!streamer.ok()) return Fail(streamer.status().ToString());
  Result<Plugin> plugin = LoadPlugin(o.plugin);
  if (!plugin.ok()) return Fail(plugin.status().ToString());
  cr_plugin_desc_t* d = plugin->desc;
  if (Status s = ReadInventory(InventoryPath(o)); !s.ok()) return Fail(s.ToString());
  if (d->init(CR_PLUGIN_STAGE__RESTORE) != 0) return Fail("restore: init failed");
  if (!g_inventory_plugins.empty()) {
    d->exit(CR_PLUGIN_STAGE__RESTORE, 1);
    return Fail("restore: Missing required plugin: " + g_inventory_plugins.front());
  }
  // CRIU forks the tasks from its main process while that has one thread;
  // a plugin's threads may only start in POST_FORKING.
  if (const size_t threads = ThreadCount(); threads != 1) {
    d->exit(CR_PLUGIN_STAGE__RESTORE, 1);
    return Fail("restore: the main process has " + std::to_string(threads) +
                " threads after the plugin's init, before it forks the restored tasks");
  }

  int report[2], go[2];
  if (::pipe2(report, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) return Fail("pipe");
  std::vector<pid_t> children;
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      ::close(go[1]);
      ::_exit(RestoreTask(*plugin, tasks[i], static_cast<int32_t>(i), report[1], go[0]));
    }
    children.push_back(pid);
  }
  ::close(report[1]);
  ::close(go[0]);
  int ret = 0;
  if (auto post_forking = plugin->Hook<int (*)()>(kHookPostForking)) {
    if (post_forking() != 0) ret = Fail("restore: POST_FORKING failed");
  }
  // Wait until every task is restored (CRIU's restore stages).
  std::vector<TaskReport> reports;
  for (size_t i = 0; i < tasks.size(); ++i) {
    int32_t header[5];
    static_assert(sizeof header == kReportHeaderSize);
    if (::read(report[0], header, sizeof header) != sizeof header) {
      ret = Fail("restore: a task died before it was restored");
      break;
    }
    if (header[3] < 0 || header[4] < 0 ||
        sizeof header + header[3] * sizeof(uint64_t) + header[4] * sizeof(InstalledFile) > PIPE_BUF) {
      ret = Fail("restore: a task's report is garbled");
      break;
    }
    TaskReport r{header[0], header[1], header[2], std::vector<uint64_t>(static_cast<size_t>(header[3])),
                 std::vector<InstalledFile>(static_cast<size_t>(header[4]))};
    const ssize_t bytes = static_cast<ssize_t>(r.new_offsets.size() * sizeof(uint64_t));
    if (bytes && ::read(report[0], r.new_offsets.data(), bytes) != bytes) ret = Fail("restore: short report");
    const ssize_t file_bytes = static_cast<ssize_t>(r.files.size() * sizeof(InstalledFile));
    if (file_bytes && ::read(report[0], r.files.data(), file_bytes) != file_bytes) ret = Fail("restore: short report");
    if (!r.ok) ret = Fail("restore: task " + std::to_string(r.pid) + " failed to restore");
    reports.push_back(std::move(r));
  }
  auto resume = plugin->Hook<int (*)(int)>(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE);
  for (const TaskReport& r : reports) {
    if (ret != 0) break;
    const int rr = resume(r.pid);
    if (rr != 0)
      ret = Fail("restore: RESUME_DEVICES_LATE(" + std::to_string(r.pid) + ") returned " + std::to_string(rr));
  }
  if (ret == 0 && resume(1) != -ENOTSUP)
    ret = Fail("restore: RESUME_DEVICES_LATE claimed a process it did not restore");
  ::close(go[1]);  // CRIU detaches; the tasks go on (here: exit)
  for (pid_t c : children) {
    if (WaitExitStatus(c) != 0) ret = ret ? ret : 1;
  }
  d->exit(CR_PLUGIN_STAGE__RESTORE, ret);
  std::sort(reports.begin(), reports.end(), [](const TaskReport& a, const TaskReport& b) { return a.task < b.task; });
  Status written = WriteRestoreReport(report_path, reports);
  if (!written.ok()) ret = Fail(written.ToString());
  return ret;
}

// Runs the restore main process.
int RunRestore(const HostOptions& o, const std::vector<Task>& tasks) {
  Status written = WriteTasks(TasksPath(o, "restore"), tasks);
  if (!written.ok()) return Fail(written.ToString());
  return RunCriuProcess(o, "restore", {});
}

// ---- checks ------------------------------------------------------------------

// The task's KFD and render-node fds are the files KFD restored it with:
// its fd of the KFD file a KFD file, and each render node's fd the very DRM
// file KFD's restore was given for that GPU (KFD grants mmap rights per DRM
// file; the ROCm runtime maps new allocations through the task's fd).
Status CheckTaskFiles(SimKfd& src, SimKfd& dst, const Task& t, const TaskReport& r) {
  const std::vector<uint32_t> gpus = src.GpuIds();
  VF_ASSIGN_OR_RETURN(std::vector<KfdDevice> devices, dst.ProcessDevices(r.pid));
  for (const TaskFd& f : t.fds) {
    if (f.kind != TaskFd::Kind::kExt) continue;
    const std::string where = "task " + std::to_string(r.pid) + "'s fd " + std::to_string(f.fd);
    auto file = std::find_if(r.files.begin(), r.files.end(),
                             [&](const InstalledFile& i) { return i.fd == static_cast<uint64_t>(f.fd); });
    if (file == r.files.end() || file->ino == 0) return Status::Internal(where + " is not open after the restore");
    if (f.ext_id == t.kfd_id) {
      if (dst.FileKind(file->dev, file->ino) != GpuFileKind::kKfd)
        return Status::Internal(where + " is not its KFD file");
      continue;
    }
    const size_t g = std::find(t.render_ids.begin(), t.render_ids.end(), f.ext_id) - t.render_ids.begin();
    if (g >= gpus.size())
      return Status::Internal(where + ": file id " + std::to_string(f.ext_id) + " is not the task's");
    auto device =
        std::find_if(devices.begin(), devices.end(), [&](const KfdDevice& d) { return d.user_gpu_id == gpus[g]; });
    if (device == devices.end()) return Status::Internal(where + ": KFD restored no device for its render node");
    VF_ASSIGN_OR_RETURN(SimKfdFile drm, dst.RestoreDrmFile(r.pid, device->actual_gpu_id));
    if (drm != SimKfdFile{file->dev, file->ino}) {
      const bool same_node = dst.FileGpu(file->dev, file->ino) == device->actual_gpu_id;
      return Status::Internal(where + " is not the DRM file KFD's restore was given for its GPU" +
                              (same_node ? " (another open of the same render node)" : ""));
    }
  }
  return Status::Ok();
}

Status CheckRestored(SimKfd& src, SimKfd& dst, const std::vector<Task>& tasks, const std::string& report_path) {
  VF_ASSIGN_OR_RETURN(std::vector<TaskReport> reports, ReadRestoreReport(report_path));
  if (reports.size() != tasks.size())
    return Status::Internal("restore reported " + std::to_string(reports.size()) + " tasks");
  uint64_t bytes = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const pid_t pid = reports[t].pid;
    VF_ASSIGN_OR_RETURN(SimKfdProcessState state, dst.ProcessState(pid));
    if (state != SimKfdProcessState::kRunning)
      return Status::Internal("task " + std::to_string(pid) + " was not resumed");
    VF_RETURN_IF_ERROR(CheckTaskFiles(src, dst, tasks[t], reports[t]));
    VF_ASSIGN_OR_RETURN(std::vector<SimKfdBoInfo> before, src.Bos(tasks[t].pid));
    VF_ASSIGN_OR_RETURN(std::vector<SimKfdBoInfo> after, dst.Bos(pid));
    if (before.size() != after.size()) return Status::Internal("BO count differs after restore");
    for (size_t i = 0; i < before.size(); ++i) {
      if (after[i].addr != before[i].addr || after[i].size != before[i].size)
        return Status::Internal("BO " + std::to_string(i) + " moved or changed size");
      if (reports[t].new_offsets.size() != before.size() || reports[t].new_offsets[i] != after[i].offset)
        return Status::Internal("UPDATE_VMA_MAP's offset for BO " + std::to_string(i) + " is not KFD's new offset");
      if (!KfdBoHasContents(before[i].alloc_flags)) continue;
      VF_ASSIGN_OR_RETURN(std::span<uint8_t> a, src.BoBytes(tasks[t].pid, i));
      VF_ASSIGN_OR_RETURN(std::span<uint8_t> b, dst.BoBytes(pid, i));
      if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0)
        return Status::Corruption("BO " + std::to_string(i) + " of task " + std::to_string(pid) +
                                  " differs from the checkpointed one");
      bytes += a.size();
    }
  }
  std::printf("verified: %zu task(s), %s of BO contents restored byte for byte, fds as dumped, queues resumed\n",
              tasks.size(), FormatSize(bytes).c_str());
  return Status::Ok();
}

// Nothing may be resumed after a failed restore.
Status CheckNothingResumed(SimKfd& dst, const std::string& report_path) {
  if (!fs::exists(report_path)) return Status::Ok();
  VF_ASSIGN_OR_RETURN(std::vector<TaskReport> reports, ReadRestoreReport(report_path));
  for (const TaskReport& r : reports) {
    Result<SimKfdProcessState> state = dst.ProcessState(r.pid);
    if (state.ok() && *state == SimKfdProcessState::kRunning)
      return Status::Internal("task " + std::to_string(r.pid) + " was resumed although the restore failed");
  }
  return Status::Ok();
}

// The CRIU process `role`, started by RunCriuProcess.
int CriuProcessMain(const HostOptions& o, const std::string& role) {
  Result<std::vector<Task>> tasks = ReadTasks(TasksPath(o, role));
  if (!tasks.ok()) return Fail(tasks.status().ToString());
  return role == "dump" ? DumpMain(o, *tasks) : RestoreMain(o, *tasks);
}

void AddHostOptions(CLI::App& app, HostOptions& o, std::string& bytes, std::string& role) {
  app.add_option("--plugin", o.plugin, "amdgpu_plugin.so to load")->required();
  app.add_option("--work", o.work, "directory for images, sockets and topology trees (created)")->required();
  app.add_option("--gpus", o.gpus, "GPUs of the checkpointed machine")->capture_default_str();
  app.add_option("--procs", o.procs, "checkpointed processes (restored as a tree of tasks)")->capture_default_str();
  app.add_option("--size", bytes, "BO bytes per GPU per process")->capture_default_str();
  app.add_option("--restore-first-gpu-id", o.restore_first_gpu_id, "gpu_id of the restoring machine's first GPU");
  app.add_option("--restore-gpus", o.restore_gpus, "GPUs of the restoring machine (default: as many)");
  app.add_flag("--legacy-pages", o.legacy_pages, "restore from upstream's raw amdgpu-pages images");
  app.add_flag("--corrupt-stream", o.corrupt_stream, "flip a byte in a VRAM stream before restoring");
  app.add_flag("--truncate-stream", o.truncate_stream, "cut a VRAM stream in half before restoring");
  app.add_flag("--expect-restore-failure", o.expect_restore_failure, "succeed only if the restore fails cleanly");
  app.add_flag("--stream", o.stream, "run CRIU with --stream: images through an image streamer, none on disk");
  app.add_option("--restore-target", o.restore_target, "VRAMFLOW_TARGET for the restore (default: the dump's)");
  app.add_flag("--incremental", o.incremental,
               "dump twice: a full dump kept in WORK/base-images, a change to the BOs, then an incremental dump "
               "with VRAMFLOW_BASE=WORK/base-images, which is restored");
  app.add_option("--restore-base", o.restore_base,
                 "VRAMFLOW_BASE for the restore: none to unset it (default: the dump's)");
  app.add_option("--fd-layout", o.fd_layout, "each task's fd table: KFD file at 3, then render nodes, or the reverse")
      ->check(CLI::IsMember({"kfd-first", "render-first"}))
      ->capture_default_str();
  app.add_option("--role", role, "internal: run as the dump or restore process")
      ->check(CLI::IsMember({"dump", "restore"}))
      ->group("");  // hidden
}

// The checkpointed machine (src) and the restoring one (dst): a simulated
// KFD each, with its sysfs topology tree and the server the plugin reaches
// it through. The servers go before the KFDs they serve.
struct Machines {
  std::unique_ptr<SimKfd> src, dst;
  std::string src_topology, dst_topology;
  std::unique_ptr<SimKfdServer> src_server, dst_server;
};

int StartMachines(const HostOptions& o, Machines* m) {
  SimKfdOptions src_options;
  src_options.gpus = o.gpus;
  m->src = std::make_unique<SimKfd>(src_options);
  SimKfdOptions dst_options = src_options;
  if (o.restore_first_gpu_id) dst_options.first_gpu_id = o.restore_first_gpu_id;
  if (o.restore_gpus) dst_options.gpus = o.restore_gpus;
  dst_options.first_render_minor = 130;  // render minors differ on the restoring machine
  m->dst = std::make_unique<SimKfd>(dst_options);
  m->src_topology = o.work + "/topology-src";
  m->dst_topology = o.work + "/topology-dst";
  std::error_code ec;
  for (auto [kfd, root] : {std::pair{m->src.get(), m->src_topology}, std::pair{m->dst.get(), m->dst_topology}}) {
    fs::remove_all(root, ec);
    Status s = kfd->WriteSysfsTopology(root);
    if (!s.ok()) return Fail(s.ToString());
  }
  Result<std::unique_ptr<SimKfdServer>> src_server = SimKfdServer::Start(m->src.get(), o.work + "/kfd-src.sock");
  Result<std::unique_ptr<SimKfdServer>> dst_server = SimKfdServer::Start(m->dst.get(), o.work + "/kfd-dst.sock");
  if (!src_server.ok()) return Fail(src_server.status().ToString());
  if (!dst_server.ok()) return Fail(dst_server.status().ToString());
  m->src_server = std::move(*src_server);
  m->dst_server = std::move(*dst_server);
  return 0;
}

// Under --stream: the images the capturing streamer took, written to `files`
// once it is gone (the images directory itself must be left empty).
int KeepCaptured(std::unique_ptr<ImageStreamer> capture, const std::string& images, const std::string& files) {
  Result<std::map<std::string, std::vector<uint8_t>>> captured = capture->Finish();
  if (!captured.ok()) return Fail(captured.status().ToString());
  capture.reset();
  for (const auto& entry : fs::directory_iterator(images))
    return Fail("--stream: the dump left " + entry.path().string() + " in the images directory");
  std::error_code ec;
  fs::remove_all(files, ec);
  fs::create_directories(files, ec);
  for (const auto& [name, bytes] : *captured) {
    FILE* f = std::fopen((files + "/" + name).c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0)
      return Fail("cannot keep " + name);
  }
  return 0;
}

// criu dump on the checkpointed machine; with --incremental a full dump
// first, kept in WORK/base-images, and a change to the BOs. *files gets the
// directory that holds the images (WORK/captured under --stream).
int DumpPhase(const HostOptions& o, Machines& m, const std::vector<Task>& tasks, std::string* files) {
  const std::string images = ImagesDir(o);
  std::error_code ec;
  ::setenv("VRAMFLOW_SIM_KFD", m.src_server->socket_path().c_str(), 1);
  ::setenv("VRAMFLOW_KFD_TOPOLOGY", m.src_topology.c_str(), 1);
  std::unique_ptr<ImageStreamer> capture;
  if (o.stream) {
    Result<std::unique_ptr<ImageStreamer>> s = ImageStreamer::Start(images, /*capture=*/true);
    if (!s.ok()) return Fail(s.status().ToString());
    capture = std::move(*s);
  }
  if (o.incremental) {
    if (o.stream) return Fail("--incremental does not combine with --stream");
    if (RunDump(o, *m.src, tasks) != 0) return Fail("the full dump failed");
    fs::remove_all(BaseImagesDir(o), ec);
    fs::rename(images, BaseImagesDir(o), ec);
    if (ec || !fs::create_directories(images, ec)) return Fail("cannot keep the full dump in " + BaseImagesDir(o));
    Status changed = ChangeBos(*m.src, tasks);
    if (!changed.ok()) return Fail(changed.ToString());
    ::setenv("VRAMFLOW_BASE", BaseImagesDir(o).c_str(), 1);
  }
  auto t0 = std::chrono::steady_clock::now();
  if (RunDump(o, *m.src, tasks) != 0) return Fail("the dump failed");
  const double dump_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Under --stream the images live in the streamer; they are kept in a
  // directory of their own here so the same tools can damage or convert them.
  *files = o.stream ? o.work + "/captured" : images;
  if (o.stream) {
    if (int rc = KeepCaptured(std::move(capture), images, *files); rc != 0) return rc;
  }
  for (const Task& t : tasks) {
    Result<SimKfdProcessState> state = m.src->ProcessState(t.pid);
    if (!state.ok() || *state != SimKfdProcessState::kRunning)
      return Fail("process " + std::to_string(t.pid) + " was left paused after the dump");
  }
  uint64_t stored = 0;
  for (const auto& entry : fs::directory_iterator(*files)) stored += entry.file_size();
  std::printf("dumped: %zu process(es) on %u GPU(s) in %.2f s, images %s\n", tasks.size(), o.gpus, dump_s,
              FormatSize(stored).c_str());
  if (o.incremental)
    std::printf("incremental: VRAM streams %llu bytes, the base's %llu bytes\n",
                static_cast<unsigned long long>(VramStreamBytes(*files)),
                static_cast<unsigned long long>(VramStreamBytes(BaseImagesDir(o))));
  return 0;
}

// Under --stream: a streamer that serves the images in `files` to the restore.
int StartServing(const std::string& images, const std::string& files, std::unique_ptr<ImageStreamer>* serve) {
  std::map<std::string, std::vector<uint8_t>> served;
  for (const auto& entry : fs::directory_iterator(files)) {
    std::vector<uint8_t>& bytes = served[entry.path().filename().string()];
    bytes.resize(entry.file_size());
    FILE* f = std::fopen(entry.path().c_str(), "rb");
    if (!f || std::fread(bytes.data(), 1, bytes.size(), f) != bytes.size())
      return Fail("cannot read " + entry.path().string());
    std::fclose(f);
  }
  Result<std::unique_ptr<ImageStreamer>> s = ImageStreamer::Start(images, /*capture=*/false, std::move(served));
  if (!s.ok()) return Fail(s.status().ToString());
  *serve = std::move(*s);
  return 0;
}

// criu restore, on the other machine, and the checks of what it restored
// (or, with --expect-restore-failure, that it failed cleanly).
int RestorePhase(const HostOptions& o, Machines& m, const std::vector<Task>& tasks, ImageStreamer* serve) {
  ::setenv("VRAMFLOW_SIM_KFD", m.dst_server->socket_path().c_str(), 1);
  ::setenv("VRAMFLOW_KFD_TOPOLOGY", m.dst_topology.c_str(), 1);
  if (!o.restore_target.empty()) ::setenv("VRAMFLOW_TARGET", o.restore_target.c_str(), 1);
  if (o.restore_base == "none") ::unsetenv("VRAMFLOW_BASE");
  else if (o.restore_base != "(as dumped)") ::setenv("VRAMFLOW_BASE", o.restore_base.c_str(), 1);
  const std::string report = ReportPath(o);
  std::error_code ec;
  fs::remove(report, ec);
  auto t0 = std::chrono::steady_clock::now();
  const int restored = RunRestore(o, tasks);
  const double restore_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (serve) {
    Result<std::map<std::string, std::vector<uint8_t>>> left = serve->Finish();
    if (!left.ok() && restored == 0) return Fail(left.status().ToString());
  }
  if (o.expect_restore_failure) {
    if (restored == 0) return Fail("the restore succeeded, but it was expected to fail");
    Status s = CheckNothingResumed(*m.dst, report);
    if (!s.ok()) return Fail(s.ToString());
    std::printf("restore failed as expected; no process was resumed\n");
    return 0;
  }
  if (restored != 0) return Fail("the restore failed");
  std::printf("restored in %.2f s\n", restore_s);
  Status checked = CheckRestored(*m.src, *m.dst, tasks, report);
  return checked.ok() ? 0 : Fail(checked.ToString());
}

int Main(int argc, char** argv) {
  HostOptions o;
  std::string bytes = "32M";
  std::string role;
  CLI::App app{"Plays CRIU for amdgpu_plugin.so on simulated GPUs: dump, restore, verify"};
  AddHostOptions(app, o, bytes, role);
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);  // a peer that went away is an error, not a death
  if (!role.empty()) return CriuProcessMain(o, role);
  Result<uint64_t> size = ParseSize(bytes);
  if (!size.ok()) return Fail(size.status().ToString());
  o.bytes_per_gpu = *size;

  const std::string images = ImagesDir(o);
  std::error_code ec;
  fs::create_directories(images, ec);
  if (ec) return Fail("cannot create " + images);
  Machines machines;
  if (int rc = StartMachines(o, &machines); rc != 0) return rc;
  std::vector<Task> tasks;
  Status built = BuildProcesses(*machines.src, o, &tasks);
  if (!built.ok()) return Fail(built.ToString());

  std::string files;
  if (int rc = DumpPhase(o, machines, tasks, &files); rc != 0) return rc;
  Status prepared;
  if (o.legacy_pages) prepared = WriteLegacyPages(*machines.src, tasks, files);
  if (prepared.ok() && (o.corrupt_stream || o.truncate_stream))
    prepared = DamageStream(tasks[0], machines.src->GpuIds().back(), files, o.truncate_stream);
  if (!prepared.ok()) return Fail(prepared.ToString());
  std::unique_ptr<ImageStreamer> serve;
  if (o.stream) {
    if (int rc = StartServing(images, files, &serve); rc != 0) return rc;
  }
  return RestorePhase(o, machines, tasks, serve.get());
}

}  // namespace
}  // namespace vramflow

int main(int argc, char** argv) { return vramflow::Main(argc, argv); }
