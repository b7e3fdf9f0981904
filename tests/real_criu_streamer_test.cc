// SPDX-License-Identifier: MIT
// RealCriu.Streamer*: `vramflow streamer` as CRIU's image streamer, end to
// end, with the real CRIU 4.2 (criu dump/restore --stream) and, for
// comparison, the real criu-image-streamer. Real processes: a Python process
// holding an array of model-like floats that reports a hash of it on
// SIGUSR1, a plain shell loop, and a process with simulated GPUs whose VRAM
// the plugin sends through the streamer.
//
// The test bed (root, the built CRIU) is described in real_criu_test.cc and
// real_criu_fixture.h. Tests whose names end in Rgw run against the local
// Ceph RGW that CTest's rgw fixture starts.
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "tests/support/netns_pair.h"
#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// Every regular file under `dir` (names) but stats-* and irmap-cache, which
// CRIU keeps on local disk whatever the streamer (O_FORCE_LOCAL).
std::set<std::string> ImageFiles(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind("stats-", 0) == 0 || name == "irmap-cache" ||
        (name.size() > 4 && name.substr(name.size() - 4) == ".log"))
      continue;
    names.insert(name);
  }
  return names;
}

// A Python process holding 48 MiB of floats: dumped through capture into a
// file, restored through serve, alive and its array intact. The stream is
// smaller than the image and holds every image file as an object.
TEST_F(RealCriu, StreamerCaptureThenServe) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  const pid_t pid = StartFloatHolder(48);
  const std::string stream = dir_.File("checkpoint.vfs");
  DumpToStream(pid, stream);
  for (const auto& e : std::filesystem::directory_iterator(images_))
    EXPECT_FALSE(e.path().filename().string().rfind("pages-", 0) == 0) << "image on disk: " << e.path();
  testing::CommandResult listed = RunShell(Vramflow() + " inspect " + ShellQuote(stream));
  ASSERT_EQ(listed.code, 0) << listed.output;
  EXPECT_NE(listed.output.find("inventory.img"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("pages-1.img"), std::string::npos) << listed.output;
  EXPECT_LT(std::filesystem::file_size(stream), 48ull << 20) << "the floats were not compressed";

  RestoreFromStream(stream);
  CheckFloatHolder(pid);
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-capture.sock"));
}

// A plain shell loop: captured to stdout (a pipe, as criu-image-streamer's
// users run it), extracted into a directory, and restored from there by a
// plain `criu restore -D` without --stream.
TEST_F(RealCriu, StreamerExtractThenPlainRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  const std::string counter = dir_.File("counter");
  const pid_t pid = ::fork();
  // Each count replaces the file whole (written aside, then renamed): `echo >`
  // truncates first, and a dump or a read between truncate and write found
  // the file empty (std::stol threw, once in a CI run).
  const std::string loop = "i=0; while :; do i=$((i+1)); echo $i > " + ShellQuote(counter + ".new") + "; mv " +
                           ShellQuote(counter + ".new") + " " + ShellQuote(counter) + "; sleep 0.05; done";
  if (pid == 0) {
    PrepareChildForCriu(dir_.File("loop.log").c_str(), nullptr);
    ::execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  started_.push_back(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string stream = dir_.File("loop.vfs");
  StartStreamer("capture", "capture | cat > " + ShellQuote(stream), "streamer-capture.sock");
  testing::CommandResult r =
      RunShell(Criu("dump", TestPluginDir()) + " --stream -t " + std::to_string(pid) + " -o dump.log");
  ASSERT_EQ(r.code, 0) << LogTail(images_ + "/dump.log");
  ASSERT_EQ(WaitStreamer("capture"), 0) << StreamerErr("capture");
  ASSERT_TRUE(WaitGone(pid));
  // The loop's last `sleep` was killed with it and is now our zombie: its
  // pid must be free for the restore.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  const std::string last = ReadText(counter);

  const std::string extracted = dir_.File("extracted");
  r = RunShell(Vramflow() + " streamer -D " + ShellQuote(extracted) + " extract < " + ShellQuote(stream));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(extracted + "/inventory.img"));
  EXPECT_FALSE(std::filesystem::exists(extracted + "/.vramflow-streamer-files")) << "the file list is not an image";
  r = RunShell("env " + CriuBinary() + " restore -D " + ShellQuote(extracted) + " -d -v4 -o restore.log");
  ASSERT_EQ(r.code, 0) << LogTail(extracted + "/restore.log");
  ASSERT_TRUE(ProcessExists(pid));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_GT(std::stol(ReadText(counter)), std::stol(last)) << "the restored loop does not count on";
}

// A process stopped with SIGSTOP, dumped with --leave-running three times:
// twice through the real criu-image-streamer, once through ours. What the
// extracts write is the same set of files, and byte for byte the same but
// for stats-* and irmap-cache (which CRIU writes to local disk) and the
// files that differ between the real streamer's own two dumps, because CRIU
// writes them differently each time (inventory.img's dump_uptime,
// timens-0.img's clock offsets, pages where its parasite ran).
TEST_F(RealCriu, StreamerExtractMatchesTheRealStreamer) {
  REQUIRE_REAL_CRIU(true);
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  const pid_t pid = StartFloatHolder(8);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  // The real streamer's capture and extract (its shards must be pipes, and
  // it exits 0 on errors: the files are checked below).
  auto theirs = [&](const std::string& name) {
    const std::string image = dir_.File(name + ".img"), out = dir_.File("extract-" + name);
    std::filesystem::remove(images_ + "/streamer-capture.sock");
    testing::CommandResult r =
        RunShell("(" + StreamerBinary() + " -D " + ShellQuote(images_) + " capture | cat > " + ShellQuote(image) +
                 ") & cap=$!; " + "for i in $(seq 1500); do [ -S " + ShellQuote(images_ + "/streamer-capture.sock") +
                 " ] && break; sleep 0.02; done; " + Criu("dump", TestPluginDir()) + " --stream --leave-running -t " +
                 std::to_string(pid) + " -o " + name +
                 // A streamer CRIU never reached waits for it forever: stop it.
                 ".log; rc=$?; [ $rc -eq 0 ] || pkill -P $cap; wait $cap; exit $rc");
    EXPECT_EQ(r.code, 0) << r.output << LogTail(images_ + "/" + name + ".log");
    std::filesystem::create_directories(out);
    r = RunShell("cat " + ShellQuote(image) + " | " + StreamerBinary() + " -D " + ShellQuote(out) + " extract");
    EXPECT_EQ(r.code, 0) << r.output;
    return out;
  };
  const std::string first = theirs("theirs1");
  const std::string ours = dir_.File("ours.vfs");
  ASSERT_EQ(DumpThroughStreamer(pid, "-o " + ShellQuote(ours), "--leave-running"), 0) << LogTail(images_ + "/dump.log");
  ASSERT_EQ(WaitStreamer("capture"), 0) << StreamerErr("capture");
  const std::string second = theirs("theirs2");
  const std::string extracted = dir_.File("extract-ours");
  testing::CommandResult r =
      RunShell(Vramflow() + " streamer -D " + ShellQuote(extracted) + " extract -i " + ShellQuote(ours));
  ASSERT_EQ(r.code, 0) << r.output;
  ::kill(pid, SIGCONT);

  const std::set<std::string> files = ImageFiles(first);
  ASSERT_GT(files.size(), 10u) << "too few images from the real streamer";
  EXPECT_EQ(files, ImageFiles(second));
  EXPECT_EQ(files, ImageFiles(extracted));
  std::set<std::string> timed;
  for (const std::string& name : files) {
    const std::string a = ReadText(first + "/" + name), b = ReadText(second + "/" + name);
    const std::string mine = ReadText(extracted + "/" + name);
    // (Compared as booleans: gtest's diff of two large strings would take
    // memory quadratic in their size.)
    if (a != b) {
      timed.insert(name);
      continue;
    }
    if (mine == a) continue;
    // The two real dumps can agree on a page CRIU's parasite touched while
    // ours, taken between them, does not (seen: 2 bytes of the last pages).
    // Allow that for memory pages only: a few bytes, all within one page.
    size_t differing = 0, first = std::string::npos, last = 0;
    for (size_t i = 0; i < std::min(mine.size(), a.size()); ++i)
      if (mine[i] != a[i]) {
        ++differing;
        if (first == std::string::npos) first = i;
        last = i;
      }
    const bool a_page_of_parasite_bytes =
        name.rfind("pages-", 0) == 0 && mine.size() == a.size() && differing <= 64 && first / 4096 == last / 4096;
    EXPECT_TRUE(a_page_of_parasite_bytes) << name << " differs from what the real streamer gave, twice: " << differing
                                          << " bytes between offsets " << first << " and " << last;
    if (a_page_of_parasite_bytes) timed.insert(name);
  }
  // What CRIU itself writes differently each time: the dump's time, and a
  // few bytes of the stopped process's pages (where CRIU's parasite ran).
  std::string list;
  for (const std::string& name : timed) list += " " + name;
  EXPECT_LE(timed.size(), 4u) << "files that change between two dumps:" << list;
}

// The plugin under --stream with vramflow streamer: its VRAM streams travel
// as objects of the one stream, stored as they are (not compressed twice),
// and the restore through serve brings back every BO byte.
TEST_F(RealCriu, StreamerCarriesThePluginsVramStreams) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  const std::string stream = dir_.File("gpu.vfs");
  const int criu = DumpThroughStreamer(pid, "-o " + ShellQuote(stream));
  ASSERT_EQ(WaitStreamer("capture"), 0) << StreamerErr("capture");
  ASSERT_EQ(criu, 0) << LogTail(images_ + "/dump.log");
  ASSERT_TRUE(WaitGone(pid));
  ASSERT_TRUE(kfd_->RemoveProcess(pid).ok());
  for (const auto& e : std::filesystem::directory_iterator(images_))
    EXPECT_EQ(e.path().filename().string().rfind("amdgpu-", 0), std::string::npos) << "image on disk: " << e.path();

  // Each VRAM stream is an object; it starts with the stream magic and is
  // stored raw: its stored bytes equal its size.
  testing::CommandResult listed = RunShell(Vramflow() + " inspect --json --full " + ShellQuote(stream));
  ASSERT_EQ(listed.code, 0) << listed.output;
  EXPECT_NE(listed.output.find("amdgpu-vram-"), std::string::npos) << listed.output.substr(0, 3000);
  const std::string one = dir_.File("vram-object");
  std::filesystem::create_directories(one);
  testing::CommandResult unpacked =
      RunShell(Vramflow() + " unpack -q " + ShellQuote(stream) + " -o " + ShellQuote(one + "/"));
  ASSERT_EQ(unpacked.code, 0) << unpacked.output;
  int vram_streams = 0;
  for (const auto& e : std::filesystem::directory_iterator(one)) {
    if (e.path().filename().string().rfind("amdgpu-vram-", 0) != 0) continue;
    ++vram_streams;
    testing::CommandResult verified = RunShell(Vramflow() + " verify -q " + ShellQuote(e.path().string()));
    EXPECT_EQ(verified.code, 0) << e.path() << ": " << verified.output;
  }
  EXPECT_EQ(vram_streams, 2);

  const int restored = RestoreThroughStreamer("-i " + ShellQuote(stream));
  ASSERT_EQ(WaitStreamer("serve"), 0) << StreamerErr("serve");
  ASSERT_EQ(restored, 0) << RestoreLog();
  Check(pid);
}

// A stream whose bytes were damaged: serve fails with the stream's error,
// CRIU's restore fails, and nothing is left behind (socket, spill files).
TEST_F(RealCriu, StreamerServeRefusesACorruptStream) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  const pid_t pid = StartFloatHolder(16);
  const std::string stream = dir_.File("checkpoint.vfs");
  DumpToStream(pid, stream);
  FlipAByteInTheMiddle(stream);
  const std::string spill = dir_.File("spill");
  std::filesystem::create_directories(spill);
  const int criu = RestoreThroughStreamer("-i " + ShellQuote(stream) + " -m 8M --spill-dir " + ShellQuote(spill));
  const int serve = WaitStreamer("serve");
  EXPECT_NE(criu, 0) << "CRIU restored from a corrupt stream";
  EXPECT_NE(serve, 0) << StreamerErr("serve");
  EXPECT_NE(StreamerErr("serve").find("offset"), std::string::npos) << StreamerErr("serve");
  EXPECT_FALSE(ProcessExists(pid)) << "a process was restored from a corrupt stream";
  EXPECT_TRUE(std::filesystem::is_empty(spill)) << "spill files left behind";
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));
}

// The checkpoint to S3 and back: capture uploads one object, serve reads it.
TEST_F(RealCriu, StreamerToS3AndBackRgw) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  if (const char* skip = std::getenv("VRAMFLOW_TEST_S3_SKIP"); skip && *skip) GTEST_SKIP() << "no Ceph RGW: " << skip;
  const char* endpoint = std::getenv("AWS_ENDPOINT_URL");
  const char* bucket = std::getenv("VRAMFLOW_TEST_S3_BUCKET");
  if (!endpoint || !*endpoint || !bucket || !*bucket)
    GTEST_SKIP() << "AWS_ENDPOINT_URL and VRAMFLOW_TEST_S3_BUCKET are not set (run through ctest)";
  const pid_t pid = StartFloatHolder(24);
  const std::string object = "s3://" + std::string(bucket) + "/streamer-" +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".vfs";
  DumpToStream(pid, object);
  testing::CommandResult verified = RunShell(Vramflow() + " verify -q " + ShellQuote(object));
  ASSERT_EQ(verified.code, 0) << verified.output;
  RestoreFromStream(object);
  CheckFloatHolder(pid);
}

// Live migration between two network namespaces joined by a veth link:
// capture in A sends the checkpoint over TLS with a shared key to serve in
// B, which answers CRIU's restore from what arrived.
TEST_F(RealCriu, StreamerMigratesOverTcpWithAKey) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  testing::NamespacePair ns;
  if (const std::string why = ns.Setup(); !why.empty()) GTEST_SKIP() << why;
  const std::string key = dir_.File("key");
  ASSERT_EQ(RunShell(Vramflow() + " keygen -o " + ShellQuote(key)).code, 0);
  const pid_t pid = StartFloatHolder(24);
  const std::string address = "tcp://" + ns.AddressOfB() + ":7443";
  StartStreamer("serve", "--listen " + address + " --key-file " + ShellQuote(key) + " serve", "streamer-serve.sock",
                ns.InB(""));
  StartStreamer("capture", "-o " + address + " --key-file " + ShellQuote(key) + " capture", "streamer-capture.sock",
                ns.InA(""));
  testing::CommandResult r =
      RunShell(Criu("dump", TestPluginDir()) + " --stream -t " + std::to_string(pid) + " -o dump.log");
  ASSERT_EQ(r.code, 0) << LogTail(images_ + "/dump.log") << StreamerErr("capture");
  ASSERT_EQ(WaitStreamer("capture"), 0) << StreamerErr("capture");
  ASSERT_TRUE(WaitGone(pid));
  r = RunShell(Criu("restore", TestPluginDir()) + " --stream -d -o restore.log");
  ASSERT_EQ(r.code, 0) << RestoreLog() << StreamerErr("serve");
  ASSERT_EQ(WaitStreamer("serve"), 0) << StreamerErr("serve");
  CheckFloatHolder(pid);
}

// The link cut in the middle of a migration: both ends fail with a clear
// error, nothing is restored, and serve leaves nothing behind.
TEST_F(RealCriu, StreamerLinkCutMidStreamFailsBothEnds) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  testing::NamespacePair ns;
  if (const std::string why = ns.Setup(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(ns.Limit("40mbit"));
  const std::string key = dir_.File("key");
  ASSERT_EQ(RunShell(Vramflow() + " keygen -o " + ShellQuote(key)).code, 0);
  const pid_t pid = StartFloatHolder(64);
  const std::string spill = dir_.File("spill");
  std::filesystem::create_directories(spill);
  const std::string address = "tcp://" + ns.AddressOfB() + ":7443";
  const std::string quick = " --key-file " + ShellQuote(key) + " --timeout 3 --retries 0 --resume-timeout 2 ";
  StartStreamer("serve", "--listen " + address + quick + "-m 16M --spill-dir " + ShellQuote(spill) + " serve",
                "streamer-serve.sock", ns.InB(""));
  StartStreamer("capture", "-o " + address + quick + "capture", "streamer-capture.sock", ns.InA(""));
  std::string dump_rc = dir_.File("dump.rc");
  RunShell("(" + Criu("dump", TestPluginDir()) + " --stream -t " + std::to_string(pid) + " -o dump.log; echo $? > " +
           ShellQuote(dump_rc) + ") > /dev/null 2>&1 &");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ns.CutLink();
  EXPECT_NE(WaitStreamer("capture"), 0) << "capture succeeded over a cut link";
  EXPECT_NE(WaitStreamer("serve"), 0) << "serve succeeded over a cut link";
  EXPECT_FALSE(StreamerErr("capture").empty());
  EXPECT_FALSE(StreamerErr("serve").empty());
  EXPECT_TRUE(std::filesystem::is_empty(spill)) << "spill files left behind";
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));
  for (int i = 0; i < 500 && !std::filesystem::exists(dump_rc); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // CRIU's dump failed with its streamer: the process runs on, undumped.
  EXPECT_NE(std::stoi(ReadText(dump_rc)), 0) << LogTail(images_ + "/dump.log");
  EXPECT_TRUE(ProcessExists(pid));
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
