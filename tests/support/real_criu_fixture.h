// SPDX-License-Identifier: MIT
// The RealCriu fixture: a real CRIU 4.2 (and criu-image-streamer) built by
// ../shared/criu/build.sh, processes holding simulated GPUs, and helpers to
// dump, restore and check them. See real_criu_test.cc for the test bed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sim/kfd/sim_kfd.h"
#include "sim/kfd/sim_kfd_service.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace real_criu {

using testing::RunShell;
using testing::ShellQuote;
using testing::TempDir;

// Where scripts/test.sh installs the real CRIU (VRAMFLOW_REAL_CRIU_PREFIX overrides).
inline std::string CriuPrefix() {
  const char* env = std::getenv("VRAMFLOW_REAL_CRIU_PREFIX");
  return env && *env ? env : VRAMFLOW_REAL_CRIU_PREFIX;
}
inline std::string CriuBinary() { return CriuPrefix() + "/sbin/criu"; }
inline std::string StreamerBinary() { return CriuPrefix() + "/bin/criu-image-streamer"; }

// Why the real CRIU cannot run here, or empty.
inline std::string WhyNoRealCriu(bool need_streamer = false) {
  if (::geteuid() != 0) return "CRIU dumps and restores need root";
  if (::access(CriuBinary().c_str(), X_OK) != 0)
    return "no real CRIU at " + CriuBinary() + " (scripts/test.sh builds it from ../shared/criu as root)";
  if (need_streamer && ::access(StreamerBinary().c_str(), X_OK) != 0)
    return "no criu-image-streamer at " + StreamerBinary();
  return "";
}

#define REQUIRE_REAL_CRIU(...)                                                                     \
  do {                                                                                             \
    const std::string why = WhyNoRealCriu(__VA_ARGS__);                                            \
    if (!why.empty()) {                                                                            \
      const char* required = std::getenv("VRAMFLOW_CRIU_REQUIRED");                                \
      if (required && std::string(required) == "1") FAIL() << "VRAMFLOW_CRIU_REQUIRED=1: " << why; \
      GTEST_SKIP() << why;                                                                         \
    }                                                                                              \
  } while (0)

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Waits until `pid` is gone, reaping it if it is our child (a restored tree
// is ours too: the fixture makes this process a child subreaper).
inline bool WaitGone(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    ::waitpid(pid, nullptr, WNOHANG);
    if (!ProcessExists(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The stand-in for /dev/kfd a test process opens itself.
inline void MakeKfdNode(const std::string& path) {
  ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(10, 237)), 0) << path << ": " << std::strerror(errno);
}

// In a child just forked for CRIU to dump: its own session, stdin
// /dev/null, output to `log`, no fds but `node` (when given) as fd 3.
// Async-signal-safe, as the child of a multi-threaded process must be.
inline void PrepareChildForCriu(const char* log, const char* node) {
  ::setsid();
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(out, 2);
  ::close_range(3, ~0U, 0);
  if (node && ::open(node, O_RDWR) != 3) ::_exit(126);
}

// Starts `sleep 1000` as CRIU wants a process to be dumped
// (PrepareChildForCriu), with the device node at `node` as fd 3 (none when
// empty). Returns its pid once it runs sleep.
inline pid_t StartSleeper(const std::string& node, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    PrepareChildForCriu(log.c_str(), node.empty() ? nullptr : node.c_str());
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until exec has happened, /proc/PID/exe is this test binary.
  for (int i = 0; i < 500; ++i) {
    std::error_code ec;
    if (std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).filename() == "sleep") return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

// Holds model-like fp32 data (read from a file vramflow gen wrote) in an
// array, prints "hash <sha256>" at start and on every SIGUSR1.
inline constexpr char kFloatHolder[] = R"(import array, hashlib, signal, sys, time
data = array.array('f')
with open(sys.argv[1], 'rb') as f:
    data.frombytes(f.read())
def report(*_):
    print('hash', hashlib.sha256(data.tobytes()).hexdigest(), flush=True)
signal.signal(signal.SIGUSR1, report)
report()
while True:
    time.sleep(0.05)
)";

// Damages one byte in the middle of the file at `path`.
inline void FlipAByteInTheMiddle(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(path) / 2);
  f.seekg(middle);
  const char byte = static_cast<char>(f.get());
  f.seekp(middle);
  f.put(static_cast<char>(byte ^ 0x5a));
}

// The last lines of a log, for failure messages.
inline std::string LogTail(const std::string& path, size_t bytes = 5000) {
  const std::string text = ReadText(path);
  return text.substr(text.size() > bytes ? text.size() - bytes : 0);
}

inline std::string Vramflow() { return ShellQuote(testing::VramflowBinary()); }

// The complete lines of `path` that start with `prefix`. A last line without
// its newline is still being written and is left out (a check once read
// "hash " of a line whose digest had not arrived yet).
inline std::vector<std::string> LinesStartingWith(const std::string& path, const std::string& prefix) {
  std::vector<std::string> lines;
  std::string text = ReadText(path);
  text.erase(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  return lines;
}

// Waits until `path` has at least `count` lines starting with `prefix`.
inline bool WaitForLines(const std::string& path, const std::string& prefix, size_t count,
                         std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (LinesStartingWith(path, prefix).size() >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class RealCriu : public ::testing::Test {
 protected:
  void SetUp() override {
    // Trees that `criu restore -d` leaves behind become our children, so
    // they can be reaped and their pids are free for the next restore.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    images_ = dir_.File("images");
    std::filesystem::create_directories(images_);
    std::filesystem::create_directories(dir_.File("nodes"));
  }
  void TearDown() override {
    for (pid_t pid : started_) {
      ::kill(pid, SIGKILL);
      WaitGone(pid);
    }
    server_.reset();
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }

  // The simulated machine behind the plugin (2 GPUs unless told). Called
  // again, it replaces the machine (another host for a restore).
  void StartKfd(uint32_t gpus = 2, uint32_t first_gpu_id = 0x1000) {
    server_.reset();
    kfd_.reset();
    SimKfdOptions options;
    options.gpus = gpus;
    options.first_gpu_id = first_gpu_id;
    options.kfd_node_dir = dir_.File("nodes");
    kfd_ = std::make_unique<SimKfd>(options);
    std::filesystem::remove_all(dir_.File("topology"));  // the previous machine's nodes
    ASSERT_TRUE(kfd_->WriteSysfsTopology(dir_.File("topology")).ok());
    auto server = SimKfdServer::Start(kfd_.get(), dir_.File("kfd.sock"));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }

  // A process holding a KFD file with BOs on every GPU, filled with model
  // data; their contents are kept for Check.
  pid_t StartGpuProcess(uint64_t seed = 1) {
    const std::string node = NewKfdNode("app-" + std::to_string(seed));
    const pid_t pid = StartSleeper(node, dir_.File("app.log"));
    started_.push_back(pid);
    AddGpuProcess(pid, node, kfd_->GpuIds(), seed);
    return pid;
  }

  // A process tree: a parent and one child, each holding its own KFD file
  // at fd 3 (nodes from NewKfdNode). Returns {parent, child}; dumping the
  // parent dumps both.
  std::pair<pid_t, pid_t> StartTwoProcessTree(const std::string& parent_node, const std::string& child_node) {
    const std::string log = dir_.File("tree.log");
    const std::string script = "/bin/sleep 1000 3<>" + ShellQuote(child_node) + " & exec /bin/sleep 1000";
    const pid_t pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
      PrepareChildForCriu(log.c_str(), parent_node.c_str());
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    started_.push_back(pid);
    pid_t child = 0;
    const std::string children = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
    for (int i = 0; i < 500 && child == 0; ++i) {
      std::error_code ec;
      const bool exec_done =
          std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).filename() == "sleep";
      std::istringstream(ReadText(children)) >> child;
      if (!exec_done) child = 0;
      if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The child's fd 3 is its own node once it runs sleep.
    for (int i = 0; i < 500 && child != 0; ++i) {
      std::error_code ec;
      if (std::filesystem::read_symlink("/proc/" + std::to_string(child) + "/fd/3", ec) == child_node) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (child != 0) started_.push_back(child);
    return {pid, child};
  }

  // A fresh stand-in device node for a process's /dev/kfd.
  std::string NewKfdNode(const std::string& name) {
    const std::string node = dir_.File("nodes/" + name);
    MakeKfdNode(node);
    return node;
  }

  // Gives `pid`, which holds `node` open, KFD state: BOs on `gpu_ids`, filled
  // with model data kept for Check.
  void AddGpuProcess(pid_t pid, const std::string& node, const std::vector<uint32_t>& gpu_ids, uint64_t seed) {
    std::vector<SimKfdBoSpec> bos;
    uint64_t addr = 0x7f0000000000ull;
    for (uint32_t gpu : gpu_ids) {
      for (uint64_t size : {3ull << 20, 1ull << 20, 64ull << 10}) {
        bos.push_back(SimKfdBoSpec{addr, size, kKfdBoVram, gpu});
        addr += size + (1 << 20);
      }
      bos.push_back(SimKfdBoSpec{addr, 256 << 10, kKfdBoGtt, gpu});
      addr += 2 << 20;
    }
    EXPECT_TRUE(kfd_->AddProcess(pid, bos, gpu_ids).ok());
    EXPECT_TRUE(kfd_->AdoptKfdFile(pid, node).ok());
    std::vector<std::vector<uint8_t>>& contents = contents_[pid];
    for (size_t i = 0; i < bos.size(); ++i) {
      auto bytes = kfd_->BoBytes(pid, i);
      EXPECT_TRUE(bytes.ok());
      contents.push_back(
          testing::ModelBytes(i % 2 ? DataKind::kBf16Weights : DataKind::kFp32Weights, bytes->size(), seed * 100 + i));
      std::copy(contents.back().begin(), contents.back().end(), bytes->begin());
    }
  }

  // The plugin's environment, and CRIU's command line up to its options.
  std::string Criu(const std::string& action, const std::string& plugin_dir, const std::string& env = "") const {
    return "env VRAMFLOW_SIM_KFD=" + ShellQuote(dir_.File("kfd.sock")) +
           " VRAMFLOW_KFD_TOPOLOGY=" + ShellQuote(dir_.File("topology")) + " " + env + " " + CriuBinary() + " " +
           action + " -D " + ShellQuote(images_) + " -v4 --libdir " + ShellQuote(plugin_dir);
  }
  static std::string TestPluginDir() { return std::filesystem::path(VRAMFLOW_PLUGIN).parent_path(); }

  // Dumps `pid` (which CRIU then kills) and forgets its KFD state, as the
  // kernel does when the process exits.
  void Dump(pid_t pid, const std::string& env = "") {
    testing::CommandResult r =
        RunShell(Criu("dump", TestPluginDir(), env) + " -t " + std::to_string(pid) + " -o dump.log");
    const std::string log = ReadText(images_ + "/dump.log");
    ASSERT_EQ(r.code, 0) << r.output << "\n--- dump.log (tail)\n"
                         << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
    ASSERT_TRUE(WaitGone(pid)) << "the dumped process " << pid << " is still there";
    if (kfd_ && kfd_->HasProcess(pid)) {
      ASSERT_TRUE(kfd_->RemoveProcess(pid).ok());
    }
  }

  testing::CommandResult Restore(const std::string& env = "", const std::string& plugin_dir = "") {
    return RunShell(Criu("restore", plugin_dir.empty() ? TestPluginDir() : plugin_dir, env) + " -d -o restore.log");
  }
  std::string RestoreLog() const { return ReadText(images_ + "/restore.log"); }

  // How many images' names start with `prefix` ("amdgpu-kfd-").
  int CountImages(const std::string& prefix) const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(images_))
      n += e.path().filename().string().rfind(prefix, 0) == 0;
    return n;
  }

  // Flips a byte in the middle of one VRAM stream in the images directory.
  void CorruptAVramStream() {
    std::string stream;
    for (const auto& e : std::filesystem::directory_iterator(images_))
      if (e.path().filename().string().rfind("amdgpu-vram-", 0) == 0) stream = e.path();
    ASSERT_FALSE(stream.empty()) << "no VRAM stream in " << images_;
    FlipAByteInTheMiddle(stream);
  }

  // The restored process: running, resumed by KFD, every BO byte as dumped,
  // and fd 3 a KFD file again.
  void Check(pid_t pid) {
    ASSERT_TRUE(ProcessExists(pid)) << "restored process " << pid << " is not running";
    auto state = kfd_->ProcessState(pid);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(*state, SimKfdProcessState::kRunning) << "KFD did not resume the restored process";
    const std::vector<std::vector<uint8_t>>& contents = contents_.at(pid);
    for (size_t i = 0; i < contents.size(); ++i) {
      auto bytes = kfd_->BoBytes(pid, i);
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      ASSERT_EQ(bytes->size(), contents[i].size());
      EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), contents[i].begin())) << "BO " << i << " differs";
    }
    struct stat st;
    ASSERT_EQ(::stat(("/proc/" + std::to_string(pid) + "/fd/3").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode) && ::major(st.st_rdev) == 10 && ::minor(st.st_rdev) == 237);
    EXPECT_EQ(kfd_->FileKind(st.st_dev, st.st_ino), GpuFileKind::kKfd);
  }

  // ---- vramflow streamer (real_criu_streamer_test.cc) ----
  // Starts the float holder on `megabytes` MiB of model-like fp32 data.
  pid_t StartFloatHolder(int megabytes) {
    const std::string script = dir_.File("holder.py"), data = dir_.File("floats.bin");
    std::ofstream(script) << kFloatHolder;
    testing::CommandResult gen =
        RunShell(Vramflow() + " gen -k fp32 -s " + std::to_string(megabytes) + "M -o " + ShellQuote(data) + " -f");
    EXPECT_EQ(gen.code, 0) << gen.output;
    log_ = dir_.File("holder.log");
    const pid_t pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
      PrepareChildForCriu(log_.c_str(), nullptr);
      ::execl("/usr/bin/python3", "python3", script.c_str(), data.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    started_.push_back(pid);
    EXPECT_TRUE(WaitForLines(log_, "hash ", 1)) << "the float holder did not start: " << ReadText(log_);
    return pid;
  }

  // The restored float holder runs and its array is what it was.
  void CheckFloatHolder(pid_t pid) {
    ASSERT_TRUE(ProcessExists(pid)) << "restored process " << pid << " is not running";
    const size_t before = LinesStartingWith(log_, "hash ").size();
    ASSERT_EQ(::kill(pid, SIGUSR1), 0);
    ASSERT_TRUE(WaitForLines(log_, "hash ", before + 1)) << "the restored process does not answer: " << ReadText(log_);
    const std::vector<std::string> hashes = LinesStartingWith(log_, "hash ");
    EXPECT_EQ(hashes.front(), hashes.back()) << "the restored array differs from the dumped one";
  }

  // `vramflow streamer -D images_ ARGS MODE` in the background; its exit
  // status goes to NAME.rc and its stderr to NAME.err under dir_. Waits for
  // its socket when `socket` is given.
  // `wrap` goes before the command (ip netns exec NS).
  void StartStreamer(const std::string& name, const std::string& args, const std::string& socket = "",
                     const std::string& wrap = "") {
    std::filesystem::remove(dir_.File(name + ".rc"));
    // A socket file another streamer left (criu-image-streamer leaves its own).
    if (!socket.empty()) std::filesystem::remove(images_ + "/" + socket);
    // A streamer CRIU never reaches gives up after a minute.
    const std::string command =
        wrap + " " + Vramflow() + " streamer -D " + ShellQuote(images_) + " --criu-timeout 60 " + args;
    testing::CommandResult r = RunShell("(" + command + " 2> " + ShellQuote(dir_.File(name + ".err")) + "; echo $? > " +
                                        ShellQuote(dir_.File(name + ".rc")) + ") > /dev/null 2>&1 &");
    ASSERT_EQ(r.code, 0);
    if (!socket.empty()) WaitForStreamerSocket(socket, name);
  }
  void WaitForStreamerSocket(const std::string& socket, const std::string& name) {
    for (int i = 0; i < 1000; ++i) {
      struct stat st;
      if (::stat((images_ + "/" + socket).c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return;
      if (std::filesystem::exists(dir_.File(name + ".rc"))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << name << " did not bind " << socket << ": " << ReadText(dir_.File(name + ".err"));
  }
  // Waits for the background streamer NAME to exit; its exit status, or -1.
  int WaitStreamer(const std::string& name, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      std::ifstream rc(dir_.File(name + ".rc"));
      int status;
      if (rc >> status) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string StreamerErr(const std::string& name) { return ReadText(dir_.File(name + ".err")); }

  // criu dump --stream of `pid` through a capture started with `args`;
  // returns CRIU's exit status.
  int DumpThroughStreamer(pid_t pid, const std::string& args, const std::string& criu_options = "") {
    StartStreamer("capture", args + " capture", "streamer-capture.sock");
    testing::CommandResult r = RunShell(Criu("dump", TestPluginDir()) + " --stream -t " + std::to_string(pid) +
                                        " -o dump.log " + criu_options);
    return r.code;
  }
  // criu restore --stream through a serve started with `args`; CRIU's exit
  // status.
  int RestoreThroughStreamer(const std::string& args) {
    StartStreamer("serve", args + " serve", "streamer-serve.sock");
    testing::CommandResult r = RunShell(Criu("restore", TestPluginDir()) + " --stream -d -o restore.log");
    return r.code;
  }

  // A dump through capture to `stream` (a file or s3:// URI), checked.
  void DumpToStream(pid_t pid, const std::string& stream, const std::string& args = "") {
    const int criu = DumpThroughStreamer(pid, "-o " + ShellQuote(stream) + " " + args);
    const int capture = WaitStreamer("capture");
    ASSERT_EQ(criu, 0) << LogTail(images_ + "/dump.log") << StreamerErr("capture");
    ASSERT_EQ(capture, 0) << StreamerErr("capture");
    ASSERT_TRUE(WaitGone(pid)) << "the dumped process " << pid << " is still there";
  }
  // A restore through serve from `stream`, checked.
  void RestoreFromStream(const std::string& stream, const std::string& args = "") {
    const int criu = RestoreThroughStreamer("-i " + ShellQuote(stream) + " " + args);
    const int serve = WaitStreamer("serve");
    ASSERT_EQ(criu, 0) << RestoreLog() << StreamerErr("serve");
    ASSERT_EQ(serve, 0) << StreamerErr("serve");
  }

  TempDir dir_;
  std::string images_;
  std::string log_;  // the float holder's output
  std::unique_ptr<SimKfd> kfd_;
  std::unique_ptr<SimKfdServer> server_;
  std::vector<pid_t> started_;
  std::map<pid_t, std::vector<std::vector<uint8_t>>> contents_;
};

}  // namespace real_criu
}  // namespace vramflow
