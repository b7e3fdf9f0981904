// SPDX-License-Identifier: MIT
// Migrations that send only what the destination lacks (issue 21, item 4),
// end to end with the vramflow binary over UNIX sockets: pack --to a
// receiver with base candidates, recv / unpack --listen with a base store.
// A checkpoint is two files: "weights" (static between checkpoints) and
// "kv" (rewritten), random so that nothing compresses and the bytes on the
// wire are easy to predict.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_child.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::WriteFileBytes;

constexpr size_t kWeights = 3 << 20;
constexpr size_t kKv = 1 << 20;

std::vector<uint8_t> Random(size_t n, uint64_t seed) { return testing::RandomBytes(n, seed); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class Child : public testing::CliChild {
 public:
  Child(const std::vector<std::string>& args, std::string log)
      : CliChild(testing::VramflowBinary(), args, std::move(log)) {}
};

struct Ran {
  int code = -1;
  std::string output;
};

Ran RunVf(const TempDir& dir, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string log = dir.File("run-" + std::to_string(counter++) + ".log");
  Child child(args, log);
  Ran r;
  r.code = child.Wait(60000ms);
  r.output = child.Log();
  return r;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Waits until the UNIX socket `path` accepts connections (bind() makes the
// file before listen(), so the file alone is not enough).
bool WaitListening(const std::string& path, Child& child) {
  for (int i = 0; i < 2000 && child.running(); ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// One checkpoint's files in `dir`/NAME/: the same weights each time, the
// KV cache drawn from `kv_seed`.
struct Checkpoint {
  std::string weights, kv;
  std::vector<uint8_t> weights_bytes, kv_bytes;
};
Checkpoint MakeCheckpoint(const TempDir& dir, const std::string& name, uint64_t kv_seed, uint64_t weights_seed = 1) {
  std::filesystem::create_directories(dir.File(name));
  Checkpoint c;
  c.weights = dir.File(name + "/weights");
  c.kv = dir.File(name + "/kv");
  c.weights_bytes = Random(kWeights, weights_seed);
  c.kv_bytes = Random(kKv, kv_seed);
  WriteFileBytes(c.weights, c.weights_bytes);
  WriteFileBytes(c.kv, c.kv_bytes);
  return c;
}

std::vector<std::string> PackArgs(const Checkpoint& c, std::vector<std::string> more) {
  std::vector<std::string> args = {"pack", c.weights, c.kv, "-c", "raw", "--chunk-size", "256K", "-q"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// `pack --to SOCKET --json ...`: the bytes it wrote into the connection.
struct Packed {
  Ran ran;
  uint64_t stream_bytes = 0;
};
Packed PackTo(const TempDir& dir, const Checkpoint& c, const std::string& socket, std::vector<std::string> more) {
  more.insert(more.begin(), {"--to", "unix:" + socket, "--json"});
  Packed p;
  p.ran = RunVf(dir, PackArgs(c, more));
  if (p.ran.code == 0) {
    const size_t open = p.ran.output.find('{'), close = p.ran.output.rfind('}');
    nlohmann::json j = open < close ? nlohmann::json::parse(p.ran.output.substr(open, close - open + 1), nullptr, false)
                                    : nlohmann::json();
    if (j.is_object() && j.contains("stream_bytes")) p.stream_bytes = j["stream_bytes"].get<uint64_t>();
  }
  return p;
}

// Restores what a sender sends to `socket` into `out` with `store` as the
// base store; returns the receiver's outcome once the sender is done.
class Restorer {
 public:
  Restorer(const TempDir& dir, const std::string& socket, const std::string& out, const std::string& store)
      : child_(
            {"unpack", "--listen", "unix:" + socket, "-o", out, "--base-store", store, "-q", "--accept-timeout", "30"},
            dir.File("unpack-" + std::to_string(++counter_) + ".log")) {
    listening_ = WaitListening(socket, child_);
  }
  bool listening() const { return listening_; }
  Ran Wait() {
    Ran r;
    r.code = child_.Wait(60000ms);
    r.output = child_.Log();
    return r;
  }

 private:
  static inline int counter_ = 0;
  Child child_;
  bool listening_ = false;
};

void ExpectRestored(const std::string& out, const Checkpoint& c) {
  EXPECT_TRUE(ReadFileBytes(out + "/weights") == c.weights_bytes) << out;
  EXPECT_TRUE(ReadFileBytes(out + "/kv") == c.kv_bytes) << out;
}

// The destination holds the previous checkpoint: only the changed KV cache
// travels (plus references and the index), and the restore is byte-exact.
TEST(IncrementalNet, DestinationWithThePreviousCheckpointGetsOnlyTheChangedBytes) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 11), v2 = MakeCheckpoint(dir, "v2", 12);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  std::filesystem::create_directories(dir.File("store"));
  std::filesystem::copy_file(dir.File("ck1.vfs"), dir.File("store/ck1.vfs"));

  Restorer restorer(dir, dir.File("sock"), dir.File("out"), dir.File("store"));
  ASSERT_TRUE(restorer.listening());
  Packed sent = PackTo(dir, v2, dir.File("sock"), {"--base", dir.File("ck1.vfs")});
  Ran restored = restorer.Wait();
  ASSERT_EQ(sent.ran.code, 0) << sent.ran.output;
  ASSERT_EQ(restored.code, 0) << restored.output;
  EXPECT_TRUE(Contains(sent.ran.output, "the receiver holds " + dir.File("ck1.vfs"))) << sent.ran.output;
  ExpectRestored(dir.File("out"), v2);
  // 1 MiB changed of 4 MiB: the references, the index and the framing of 16
  // chunks cost a few KiB.
  EXPECT_GT(sent.stream_bytes, kKv);
  EXPECT_LT(sent.stream_bytes, kKv + (64 << 10)) << sent.ran.output;
}

// recv stores an incremental stream as it arrives, with its index, having
// verified it against its store; it is then a base itself. The same
// checkpoint sent to a receiver that holds nothing costs the full size.
TEST(IncrementalNet, RecvStoresTheIncrementalStreamAndAnEmptyStoreGetsAFullOne) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 21), v2 = MakeCheckpoint(dir, "v2", 22);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  std::filesystem::create_directories(dir.File("store"));
  std::filesystem::copy_file(dir.File("ck1.vfs"), dir.File("store/ck1.vfs"));
  std::filesystem::create_directories(dir.File("empty"));

  for (const char* store : {"store", "empty"}) {
    SCOPED_TRACE(store);
    const std::string stored = dir.File(std::string(store) + "/ck2.vfs");
    Child recv({"recv", "--listen", "unix:" + dir.File("rsock"), "-o", stored, "--base-store", dir.File(store), "-q",
                "--accept-timeout", "30"},
               dir.File(std::string("recv-") + store + ".log"));
    ASSERT_TRUE(WaitListening(dir.File("rsock"), recv));
    Packed sent = PackTo(dir, v2, dir.File("rsock"), {"--base", dir.File("ck1.vfs")});
    ASSERT_EQ(sent.ran.code, 0) << sent.ran.output;
    ASSERT_EQ(recv.Wait(60000ms), 0) << recv.Log();
    EXPECT_EQ(FileSize(stored), sent.stream_bytes);
    if (std::string(store) == "store") {
      EXPECT_LT(sent.stream_bytes, kKv + (64 << 10)) << sent.ran.output;
    } else {
      EXPECT_TRUE(Contains(sent.ran.output, "the receiver holds none of the 1 candidate bases: sending a full stream"))
          << sent.ran.output;
      EXPECT_GT(sent.stream_bytes, kWeights + kKv);
    }
    // What recv stored is an indexed stream that restores (against the
    // store) to v2: the next migration's base.
    Ran index = RunVf(dir, {"inspect", stored, "--json"});
    EXPECT_EQ(index.code, 0) << index.output;
    Restorer restorer(dir, dir.File("usock"), dir.File(std::string("out-") + store), dir.File(store));
    ASSERT_TRUE(restorer.listening());
    Ran resent = RunVf(dir, {"send", "-q", stored, "unix:" + dir.File("usock")});
    EXPECT_EQ(resent.code, 0) << resent.output;
    Ran restored = restorer.Wait();
    EXPECT_EQ(restored.code, 0) << restored.output;
    ExpectRestored(dir.File(std::string("out-") + store), v2);
  }
}

// A store with an unrelated stream (another process's checkpoint): nothing
// to build on, a full stream, still right.
TEST(IncrementalNet, UnrelatedStreamInTheStoreGetsAFullStream) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 31), v2 = MakeCheckpoint(dir, "v2", 32);
  const Checkpoint other = MakeCheckpoint(dir, "other", 33, /*weights_seed=*/99);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  std::filesystem::create_directories(dir.File("store"));
  ASSERT_EQ(RunVf(dir, PackArgs(other, {"-o", dir.File("store/other.vfs")})).code, 0);
  Restorer restorer(dir, dir.File("sock"), dir.File("out"), dir.File("store"));
  ASSERT_TRUE(restorer.listening());
  Packed sent = PackTo(dir, v2, dir.File("sock"), {"--base", dir.File("ck1.vfs")});
  Ran restored = restorer.Wait();
  ASSERT_EQ(sent.ran.code, 0) << sent.ran.output;
  ASSERT_EQ(restored.code, 0) << restored.output;
  EXPECT_TRUE(Contains(sent.ran.output, "holds none")) << sent.ran.output;
  EXPECT_GT(sent.stream_bytes, kWeights + kKv);
  ExpectRestored(dir.File("out"), v2);
}

// A chain: ck2 is built on ck1, both delivered to recv --output-dir (its
// own directory is its store; ck2 is verified against ck1 there). v3 is
// then sent built on ck2, whose own base the receiver takes from its store.
TEST(IncrementalNet, BaseChainResolvedFromTheStore) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 41), v2 = MakeCheckpoint(dir, "v2", 42),
                   v3 = MakeCheckpoint(dir, "v3", 43);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  Ran second = RunVf(dir, PackArgs(v2, {"-o", dir.File("ck2.vfs"), "--base", dir.File("ck1.vfs")}));
  ASSERT_EQ(second.code, 0) << second.output;
  std::filesystem::create_directories(dir.File("store"));
  Child recv({"recv", "--listen", "unix:" + dir.File("rsock"), "--output-dir", dir.File("store"), "--count", "2",
              "--accept-timeout", "30", "--progress", "none"},
             dir.File("recv.log"));
  ASSERT_TRUE(WaitListening(dir.File("rsock"), recv));
  for (const char* name : {"ck1.vfs", "ck2.vfs"}) {
    Ran sent = RunVf(dir, {"send", "-q", dir.File(name), "unix:" + dir.File("rsock"), "--name", name});
    ASSERT_EQ(sent.code, 0) << name << ": " << sent.output;
  }
  ASSERT_EQ(recv.Wait(60000ms), 0) << recv.Log();
  EXPECT_TRUE(Contains(recv.Log(), "1 stream(s) to offer")) << recv.Log();

  Restorer restorer(dir, dir.File("sock"), dir.File("out"), dir.File("store"));
  ASSERT_TRUE(restorer.listening());
  Packed sent = PackTo(dir, v3, dir.File("sock"), {"--base", dir.File("ck2.vfs"), "--base", dir.File("ck1.vfs")});
  Ran restored = restorer.Wait();
  ASSERT_EQ(sent.ran.code, 0) << sent.ran.output;
  ASSERT_EQ(restored.code, 0) << restored.output;
  EXPECT_TRUE(Contains(sent.ran.output, "the receiver holds " + dir.File("ck2.vfs"))) << sent.ran.output;
  EXPECT_LT(sent.stream_bytes, kKv + (64 << 10));
  ExpectRestored(dir.File("out"), v3);
}

// A stream built on a base the receiver never offered (it does not hold it)
// is refused before anything is written: recv stores nothing, unpack
// writes nothing, and the sender hears why.
TEST(IncrementalNet, StreamOnABaseNeverOfferedIsRefused) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 51), v2 = MakeCheckpoint(dir, "v2", 52);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  ASSERT_EQ(RunVf(dir, PackArgs(v2, {"-o", dir.File("ck2.vfs"), "--base", dir.File("ck1.vfs")})).code, 0);
  std::filesystem::create_directories(dir.File("store"));

  Child recv({"recv", "--listen", "unix:" + dir.File("rsock"), "--output-dir", dir.File("store"), "--count", "1",
              "--accept-timeout", "30", "--progress", "none"},
             dir.File("recv.log"));
  ASSERT_TRUE(WaitListening(dir.File("rsock"), recv));
  Ran sent = RunVf(dir, {"send", "-q", dir.File("ck2.vfs"), "unix:" + dir.File("rsock"), "--name", "ck2.vfs"});
  EXPECT_NE(sent.code, 0);
  EXPECT_TRUE(Contains(sent.output, "never offered")) << sent.output;
  recv.Kill(SIGTERM);
  recv.Wait(20000ms);
  EXPECT_TRUE(std::filesystem::is_empty(dir.File("store"))) << recv.Log();

  Restorer restorer(dir, dir.File("sock"), dir.File("out"), dir.File("store"));
  ASSERT_TRUE(restorer.listening());
  sent = RunVf(dir, {"send", "-q", dir.File("ck2.vfs"), "unix:" + dir.File("sock")});
  Ran restored = restorer.Wait();
  EXPECT_NE(sent.code, 0);
  EXPECT_NE(restored.code, 0);
  EXPECT_TRUE(Contains(restored.output, "never offered")) << restored.output;
  EXPECT_FALSE(Exists(dir.File("out/weights")));
  EXPECT_FALSE(Exists(dir.File("out/kv")));
}

// A receiver that offered a base and then cannot produce it (the stored
// file was replaced by another stream after the scan) fails at the BASE
// frame, naming the base, before anything is written.
TEST(IncrementalNet, OfferedBaseThatChangedFailsClearly) {
  TempDir dir;
  const Checkpoint v1 = MakeCheckpoint(dir, "v1", 61), v2 = MakeCheckpoint(dir, "v2", 62);
  const Checkpoint other = MakeCheckpoint(dir, "other", 63, /*weights_seed=*/98);
  ASSERT_EQ(RunVf(dir, PackArgs(v1, {"-o", dir.File("ck1.vfs")})).code, 0);
  ASSERT_EQ(RunVf(dir, PackArgs(other, {"-o", dir.File("other.vfs")})).code, 0);
  std::filesystem::create_directories(dir.File("store"));
  std::filesystem::copy_file(dir.File("ck1.vfs"), dir.File("store/ck1.vfs"));
  Restorer restorer(dir, dir.File("sock"), dir.File("out"), dir.File("store"));
  ASSERT_TRUE(restorer.listening());  // scanned: ck1 is offered
  std::filesystem::copy_file(dir.File("other.vfs"), dir.File("store/ck1.vfs"),
                             std::filesystem::copy_options::overwrite_existing);
  Packed sent = PackTo(dir, v2, dir.File("sock"), {"--base", dir.File("ck1.vfs")});
  Ran restored = restorer.Wait();
  EXPECT_NE(sent.ran.code, 0);
  EXPECT_NE(restored.code, 0);
  EXPECT_TRUE(Contains(restored.output, "cannot open it")) << restored.output;
  EXPECT_TRUE(Contains(sent.ran.output, "cannot open it")) << sent.ran.output;
  EXPECT_FALSE(Exists(dir.File("out/weights")));
  EXPECT_FALSE(Exists(dir.File("out/kv")));
}

}  // namespace
}  // namespace vramflow
