// SPDX-License-Identifier: MIT
// RealCriu.Incremental*: incremental checkpoints with the real CRIU 4.2.
// `vramflow streamer capture --base` (the whole checkpoint, CPU pages too,
// against an earlier capture: CRIU's own incremental dumps need soft-dirty
// tracking, which this kernel lacks) and the plugin's VRAMFLOW_BASE (each
// GPU's VRAM stream against the earlier dump's).
//
// The test bed (root, the built CRIU) is described in real_criu_test.cc and
// real_criu_fixture.h.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

uint64_t VramStreamBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("amdgpu-vram-", 0) == 0) bytes += e.file_size();
  return bytes;
}

// A Python process holding 48 MiB of floats, dumped twice through capture
// (the first time left running): the second against the first is a small
// fraction of it, and restores through serve with the base, alive and its
// array intact. Served with the wrong base, nothing is restored. The two
// streams moved to another directory still find each other.
TEST_F(RealCriu, IncrementalStreamerCaptureThenServeWithTheBase) {
  REQUIRE_REAL_CRIU();
  StartKfd();  // the plugin CRIU loads talks to it, GPUs or not
  const pid_t pid = StartFloatHolder(48);
  const std::string full = dir_.File("full.vfs"), next = dir_.File("next.vfs");
  ASSERT_EQ(DumpThroughStreamer(pid, "-o " + ShellQuote(full), "--leave-running"), 0) << LogTail(images_ + "/dump.log");
  ASSERT_EQ(WaitStreamer("capture"), 0) << StreamerErr("capture");
  ASSERT_TRUE(ProcessExists(pid));
  DumpToStream(pid, next, "--base " + ShellQuote(full));

  const uint64_t full_bytes = std::filesystem::file_size(full), next_bytes = std::filesystem::file_size(next);
  std::printf("full checkpoint %llu bytes, incremental %llu bytes\n", static_cast<unsigned long long>(full_bytes),
              static_cast<unsigned long long>(next_bytes));
  EXPECT_GT(full_bytes, 30ull << 20) << "the floats should dominate the full checkpoint";
  EXPECT_LT(next_bytes * 3, full_bytes) << "the incremental checkpoint is not much smaller: " << next_bytes << " of "
                                        << full_bytes << " bytes";
  testing::CommandResult listed = RunShell(Vramflow() + " inspect " + ShellQuote(next));
  EXPECT_EQ(listed.code, 0) << listed.output;

  // The wrong base (the stream itself): serve fails at the stream's first
  // frame, before CRIU could take a file, and says why.
  testing::CommandResult wrong = RunShell("timeout 60 " + Vramflow() + " streamer -D " + ShellQuote(images_) +
                                          " serve -i " + ShellQuote(next) + " --base " + ShellQuote(next) + " 2>&1");
  EXPECT_EQ(wrong.code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("wrong base"), std::string::npos) << wrong.output;
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));

  RestoreFromStream(next, "--base " + ShellQuote(full));
  CheckFloatHolder(pid);

  // The BASE frame names the base by its path from the stream's directory,
  // as pack's do: moved together, the two are still found without --base.
  testing::CommandResult inspected = RunShell(Vramflow() + " inspect --json " + ShellQuote(next));
  ASSERT_EQ(inspected.code, 0) << inspected.output;
  EXPECT_EQ(nlohmann::json::parse(inspected.output, nullptr, false)["base"]["location"], "full.vfs")
      << inspected.output;
  const std::string moved = dir_.File("moved"), extracted = dir_.File("extracted");
  std::filesystem::create_directory(moved);
  std::filesystem::rename(full, moved + "/full.vfs");
  std::filesystem::rename(next, moved + "/next.vfs");
  testing::CommandResult extract = RunShell(Vramflow() + " streamer -D " + ShellQuote(extracted) + " -i " +
                                            ShellQuote(moved + "/next.vfs") + " extract 2>&1");
  EXPECT_EQ(extract.code, 0) << extract.output;
  EXPECT_TRUE(std::filesystem::exists(extracted + "/inventory.img")) << extract.output;
}

// The plugin's VRAMFLOW_BASE under the real CRIU: a dump left running, a
// change to some BOs, a dump against the first, restored with it: every BO
// byte as at the second dump.
TEST_F(RealCriu, IncrementalGpuDumpAndRestoreWithVramflowBase) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  testing::CommandResult first =
      RunShell(Criu("dump", TestPluginDir()) + " --leave-running -t " + std::to_string(pid) + " -o dump.log");
  ASSERT_EQ(first.code, 0) << first.output << LogTail(images_ + "/dump.log");
  const std::string base = dir_.File("base-images");
  std::filesystem::rename(images_, base);
  std::filesystem::create_directories(images_);

  // A training step: low bits of every fourth word of BO 1 (1 MiB of bf16),
  // BO 3 (the GTT BO) rewritten; the rest as it was.
  std::vector<std::vector<uint8_t>>& contents = contents_.at(pid);
  for (size_t w = 0; w < contents[1].size(); w += 8) contents[1][w] ^= 0x3;
  contents[3] = testing::ModelBytes(DataKind::kRandom, contents[3].size(), 77);
  for (size_t i : {size_t{1}, size_t{3}}) {
    auto bytes = kfd_->BoBytes(pid, i);
    ASSERT_TRUE(bytes.ok());
    std::copy(contents[i].begin(), contents[i].end(), bytes->begin());
  }
  Dump(pid, "VRAMFLOW_BASE=" + ShellQuote(base));
  EXPECT_LT(3 * VramStreamBytes(images_), VramStreamBytes(base));

  testing::CommandResult restored = Restore("VRAMFLOW_BASE=" + ShellQuote(base));
  ASSERT_EQ(restored.code, 0) << restored.output << LogTail(images_ + "/restore.log");
  Check(pid);
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
