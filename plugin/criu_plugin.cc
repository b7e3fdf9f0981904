// amdgpu_plugin.so: the CRIU plugin entry points (registered under CRIU's
// own plugin name "amdgpu_plugin", so images of either implementation pass
// CRIU's inventory check).
//
// Built against the criu-plugin.h found at configure time; CMake detects
// which hooks that CRIU generation has (VRAMFLOW_CRIU_HAS_* below) and only
// those are registered. Every hook answers -ENOTSUP for fds, VMAs and pids
// that are not KFD's or a render node's, as CRIU requires.
//
// STATUS: the hook plumbing, device recognition and ABI are in place; the
// KFD dump and restore paths are not wired up yet and fail loudly (see
// NotImplemented) instead of producing an incomplete checkpoint.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

// Everything here is hidden except the descriptor CRIU looks up by name
// (plugin/amdgpu_plugin.map exports only it).
#pragma GCC visibility push(default)
extern "C" {
#include <criu/criu-plugin.h>
}
#pragma GCC visibility pop

namespace {

constexpr unsigned kDrmMajor = 226;  // DRM character devices; render nodes are minors 128..255

int NotImplemented(const char* hook) {
  std::fprintf(stderr,
               "vramflow amdgpu_plugin: %s: saving or restoring KFD state is not implemented yet in this build; "
               "refusing instead of writing an incomplete checkpoint\n",
               hook);
  return -EINVAL;  // not -ENOTSUP: that would mean "not mine"
}

// The major number of /dev/kfd on this machine (0 when there is none).
unsigned KfdMajor() {
  struct stat st;
  if (::stat("/dev/kfd", &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
  return major(st.st_rdev);
}

bool IsRenderNode(const struct stat& st) {
  return S_ISCHR(st.st_mode) && major(st.st_rdev) == kDrmMajor && minor(st.st_rdev) >= 128 && minor(st.st_rdev) <= 255;
}

bool IsKfd(const struct stat& st) {
  unsigned kfd = KfdMajor();
  return S_ISCHR(st.st_mode) && kfd != 0 && major(st.st_rdev) == kfd;
}

bool IsOurs(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && (IsKfd(st) || IsRenderNode(st));
}

int PluginInit(int stage) {
  (void)stage;
  return 0;
}

void PluginFini(int stage, int ret) {
  (void)stage;
  (void)ret;
}

int HandleDeviceVma(int fd, const struct stat* st) {
  (void)fd;
  if (!st || !(IsKfd(*st) || IsRenderNode(*st))) return -ENOTSUP;
  return 0;  // CRIU skips these pages; BO contents travel in the plugin's streams
}

int DumpExtFile(int fd, int id) {
  (void)id;
  if (!IsOurs(fd)) return -ENOTSUP;
  return NotImplemented("DUMP_EXT_FILE");
}

#ifdef VRAMFLOW_CRIU_RESTORE_EXT_FILE_RETRY
int RestoreExtFile(int id, bool* retry_needed) {
  if (retry_needed) *retry_needed = false;
#else
int RestoreExtFile(int id) {
#endif
  (void)id;
  // Our images would be amdgpu-kfd-<id>.img; none can exist yet.
  return -ENOTSUP;
}

int UpdateVmaMap(const char* path, const uint64_t addr, const uint64_t old_pgoff, uint64_t* new_pgoff,
                 int* plugin_fd) {
  (void)path;
  (void)addr;
  (void)old_pgoff;
  (void)new_pgoff;
  (void)plugin_fd;
  return -ENOTSUP;
}

int ResumeDevicesLate(int pid) {
  (void)pid;
  return -ENOTSUP;
}

#ifdef VRAMFLOW_CRIU_HAS_POST_FORKING
int PostForking() { return 0; }  // no restore in flight to hand to a worker yet
#endif
#ifdef VRAMFLOW_CRIU_HAS_DUMP_DEVICES_LATE
int DumpDevicesLate(int id) {
  (void)id;
  return 0;  // nothing paused by us to resume
}
#endif

}  // namespace

extern "C" {
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
