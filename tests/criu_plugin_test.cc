// SPDX-License-Identifier: MIT
// amdgpu_plugin.so as CRIU sees it: loaded with dlopen, found by its
// descriptor symbol, with the ABI version and hook table of the
// criu-plugin.h it was built against, and answering -ENOTSUP for what is
// not its own.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <sstream>
#include <string>

extern "C" {
#include <criu/criu-plugin.h>
}

#include "tests/support/test_util.h"

// CRIU exports this to its plugins; here it is the root directory, which
// these tests never write to.
extern "C" __attribute__((visibility("default"))) int criu_get_image_dir(void) {
  static int dir = ::open("/", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  return dir;
}

namespace vramflow {
namespace {

// Loaded once per process and never closed, as CRIU does: the plugin's
// protobuf code registers itself with libprotobuf at load time, and a second
// load in one process would register it twice.
class Plugin {
 public:
  Plugin() : handle_(Handle()) {}
  bool loaded() const { return handle_ != nullptr; }
  cr_plugin_desc_t* desc() const { return static_cast<cr_plugin_desc_t*>(::dlsym(handle_, "CR_PLUGIN_DESC")); }
  template <typename Fn>
  Fn* hook(int index) const {
    return reinterpret_cast<Fn*>(desc()->hooks[index]);
  }

 private:
  static void* Handle() {
    static void* handle = ::dlopen(VRAMFLOW_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    return handle;
  }
  void* handle_;

 public:
  // As CRIU does before any hook; undone by the destructor of the guard.
  struct Stage {
    explicit Stage(cr_plugin_desc_t* d, int stage) : desc(d), stage(stage), ret(d->init(stage)) {}
    ~Stage() { desc->exit(stage, 0); }
    cr_plugin_desc_t* desc;
    int stage;
    int ret;
  };
};

TEST(CriuPlugin, ExportsTheDescriptorCriuLooksFor) {
  Plugin plugin;
  ASSERT_TRUE(plugin.loaded()) << ::dlerror();
  cr_plugin_desc_t* desc = plugin.desc();
  ASSERT_NE(desc, nullptr);
  EXPECT_STREQ(desc->name, "amdgpu_plugin");  // what CRIU's inventory records
  EXPECT_EQ(desc->version, static_cast<unsigned>(CRIU_PLUGIN_VERSION));
  EXPECT_EQ(desc->max_hooks, static_cast<unsigned>(CR_PLUGIN_HOOK__MAX));
  ASSERT_NE(desc->init, nullptr);
  ASSERT_NE(desc->exit, nullptr);
  EXPECT_EQ(desc->init(CR_PLUGIN_STAGE__DUMP), 0);
  desc->exit(CR_PLUGIN_STAGE__DUMP, 0);
}

TEST(CriuPlugin, RegistersTheDeviceHooksAndNothingElse) {
  Plugin plugin;
  ASSERT_TRUE(plugin.loaded()) << ::dlerror();
  cr_plugin_desc_t* desc = plugin.desc();
  for (int hook : {CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, CR_PLUGIN_HOOK__DUMP_EXT_FILE, CR_PLUGIN_HOOK__RESTORE_EXT_FILE,
                   CR_PLUGIN_HOOK__UPDATE_VMA_MAP, CR_PLUGIN_HOOK__RESUME_DEVICES_LATE})
    EXPECT_NE(desc->hooks[hook], nullptr) << "hook " << hook;
  for (int hook : {CR_PLUGIN_HOOK__DUMP_UNIX_SK, CR_PLUGIN_HOOK__RESTORE_UNIX_SK, CR_PLUGIN_HOOK__DUMP_EXT_MOUNT,
                   CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT, CR_PLUGIN_HOOK__DUMP_EXT_LINK})
    EXPECT_EQ(desc->hooks[hook], nullptr) << "hook " << hook;
}

TEST(CriuPlugin, OnlyTheDescriptorIsExported) {
  std::string out;
  ASSERT_EQ(testing::RunCommand(std::string("nm -D --defined-only ") + VRAMFLOW_PLUGIN, &out), 0) << out;
  EXPECT_NE(out.find(" CR_PLUGIN_DESC\n"), std::string::npos) << out;
  // One line: nothing else of ours leaks into CRIU's symbol space.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// The installed plugin is the product: it cannot be pointed at the
// simulated KFD (none of it is linked in), while the test build can.
TEST(CriuPlugin, ProductPluginCarriesNoSimulator) {
  for (const char* plugin : {VRAMFLOW_PRODUCT_PLUGIN, VRAMFLOW_PLUGIN}) {
    std::string symbols, strings;
    ASSERT_EQ(testing::RunCommand(std::string("nm -C ") + plugin, &symbols), 0) << symbols;
    ASSERT_EQ(testing::RunCommand(std::string("strings ") + plugin, &strings), 0);
    const bool product = std::string(plugin) == VRAMFLOW_PRODUCT_PLUGIN;
    for (const char* sim : {"SimKfd", "SimDevice", "SimGpuBackend", "sim_wire"})
      EXPECT_EQ(symbols.find(sim) == std::string::npos, product) << plugin << ": " << sim;
    EXPECT_EQ(strings.find("VRAMFLOW_SIM_KFD") == std::string::npos, product) << plugin;
  }
}

// Both builds are linked -z nodelete: CRIU dlcloses plugins at the end of a
// run, and oneTBB must stay mapped under anything it still runs.
TEST(CriuPlugin, StaysLoadedAfterDlclose) {
  for (const char* plugin : {VRAMFLOW_PRODUCT_PLUGIN, VRAMFLOW_PLUGIN}) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(std::string("readelf -d ") + plugin, &out), 0) << out;
    EXPECT_NE(out.find("NODELETE"), std::string::npos) << plugin << ":\n" << out;
  }
}

TEST(CriuPlugin, AnswersNotSupportedForWhatIsNotItsOwn) {
  Plugin plugin;
  ASSERT_TRUE(plugin.loaded()) << ::dlerror();
  Plugin::Stage stage(plugin.desc(), CR_PLUGIN_STAGE__RESTORE);
  ASSERT_EQ(stage.ret, 0);
  testing::TempDir dir;
  testing::WriteFileBytes(dir.File("f"), {1, 2, 3});
  int fd = ::open(dir.File("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct stat regular;
  ASSERT_EQ(::fstat(fd, &regular), 0);
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__DUMP_EXT_FILE_t>(CR_PLUGIN_HOOK__DUMP_EXT_FILE)(fd, 1), -ENOTSUP);
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(fd, &regular),
            -ENOTSUP);
  ::close(fd);
  struct stat dev_null;
  ASSERT_EQ(::stat("/dev/null", &dev_null), 0);
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(-1, &dev_null),
            -ENOTSUP);
  uint64_t new_pgoff = 0;
  int plugin_fd = -1;
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__UPDATE_VMA_MAP_t>(CR_PLUGIN_HOOK__UPDATE_VMA_MAP)("/dev/zero", 0x1000, 0,
                                                                                          &new_pgoff, &plugin_fd),
            -ENOTSUP);
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__RESUME_DEVICES_LATE_t>(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE)(12345), -ENOTSUP);
}

TEST(CriuPlugin, ClaimsRenderNodeMappings) {
  Plugin plugin;
  ASSERT_TRUE(plugin.loaded()) << ::dlerror();
  Plugin::Stage stage(plugin.desc(), CR_PLUGIN_STAGE__DUMP);
  ASSERT_EQ(stage.ret, 0);
  struct stat render {};
  render.st_mode = S_IFCHR | 0666;
  render.st_rdev = makedev(226, 128);  // /dev/dri/renderD128
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(-1, &render), 0);
  struct stat card = render;
  card.st_rdev = makedev(226, 0);  // /dev/dri/card0: not a render node
  EXPECT_EQ(plugin.hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(-1, &card), -ENOTSUP);
}

// The plugin runs inside CRIU, whose signal handling is CRIU's own: it must
// install no handler (CRIU's SIGCHLD handler and its own Ctrl-C behaviour
// stay as they are). It may block signals in the threads it starts and take
// a SIGPIPE it caused itself (sigtimedwait), but nothing that changes a
// disposition or arms a timer signal is imported.
TEST(CriuPlugin, ImportsNoSignalHandlerApi) {
  for (const char* plugin : {VRAMFLOW_PRODUCT_PLUGIN, VRAMFLOW_PLUGIN}) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(std::string("nm -D --undefined-only ") + plugin, &out), 0) << out;
    std::istringstream lines(out);
    std::string line;
    int imports = 0;
    while (std::getline(lines, line)) {
      std::string name = line.substr(line.find_last_of(' ') + 1);
      name = name.substr(0, name.find('@'));
      ++imports;
      for (const char* forbidden : {"sigaction", "signal", "sigset", "bsd_signal", "sysv_signal", "__sysv_signal",
                                    "sigvec", "alarm", "setitimer", "signalfd", "timer_create"})
        EXPECT_NE(name, forbidden) << plugin << " imports " << name;
    }
    EXPECT_GT(imports, 10) << "nm listed no imports of " << plugin << ":\n" << out;
  }
}

// And at run time: every signal's disposition is the same after the plugin
// was initialised, ran its hooks and was torn down.
TEST(CriuPlugin, LeavesSignalDispositionsAsTheyWere) {
  Plugin plugin;
  ASSERT_TRUE(plugin.loaded()) << ::dlerror();
  struct sigaction before[NSIG] = {};
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, nullptr, &before[sig]);
  for (int stage_id : {CR_PLUGIN_STAGE__DUMP, CR_PLUGIN_STAGE__RESTORE}) {
    Plugin::Stage stage(plugin.desc(), stage_id);
    ASSERT_EQ(stage.ret, 0);
    struct stat render {};
    render.st_mode = S_IFCHR | 0666;
    render.st_rdev = makedev(226, 128);
    (void)plugin.hook<CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA_t>(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(-1, &render);
    (void)plugin.hook<CR_PLUGIN_HOOK__RESUME_DEVICES_LATE_t>(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE)(12345);
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction after {};
    ::sigaction(sig, nullptr, &after);
    EXPECT_EQ(reinterpret_cast<void*>(after.sa_handler), reinterpret_cast<void*>(before[sig].sa_handler))
        << "signal " << sig << " (" << strsignal(sig) << ")";
    EXPECT_EQ(after.sa_flags, before[sig].sa_flags) << "signal " << sig;
  }
}

}  // namespace
}  // namespace vramflow
