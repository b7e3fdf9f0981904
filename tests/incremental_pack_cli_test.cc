// SPDX-License-Identifier: MIT
// `vramflow pack --base`, `--base-refs-only` and `--digests` on files:
// an incremental stream holds only what changed, reports new, referenced
// and delta-coded bytes, and unpacks with its base to the exact files;
// bases that cannot serve are clear errors that leave no output.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/shell.h"
#include "tests/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;

CommandResult Sh(const std::string& dir, const std::string& line) {
  CommandResult r;
  r.code = RunCommand("( cd " + Q(dir) + " && VF=" + Q(VramflowBinary()) + "; " + line + " )", &r.output);
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

#define EXPECT_CODE(result, expected) EXPECT_EQ((result).code, (expected)) << (result).output
#define ASSERT_CODE(result, expected) ASSERT_EQ((result).code, (expected)) << (result).output

// Three model-like files packed as a base (with digests), then changed: 1 MiB
// of the fp32 master rewritten with random bytes, and 4 MiB of Adam's second
// moment replaced by other model-like data.
class IncrementalPack : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CODE(Sh(dir_.path(), "mkdir v1 v2 && $VF gen -k bf16 -s 8M -o v1/weights.bin && "
                                "$VF gen -k adam-v -s 6M --seed 3 -o v1/optimizer.bin && "
                                "$VF gen -k fp32 -s 4M --seed 4 -o v1/master.bin && cp v1/* v2/"),
                0);
    ASSERT_CODE(Sh(dir_.path(), "$VF pack -q --digests v1/weights.bin v1/optimizer.bin v1/master.bin -o base.vfs"), 0);
    ASSERT_CODE(Sh(dir_.path(), "$VF gen -k random -s 1M --seed 9 -o r.bin && "
                                "dd if=r.bin of=v2/master.bin bs=1M seek=2 conv=notrunc status=none && "
                                "$VF gen -k adam-v -s 4M --seed 8 -o a.bin && "
                                "dd if=a.bin of=v2/optimizer.bin bs=1M seek=1 conv=notrunc status=none"),
                0);
  }
  nlohmann::json PackJson(const std::string& flags, const std::string& out) {
    CommandResult r = Sh(dir_.path(), "$VF pack --json " + flags + " v2/weights.bin v2/optimizer.bin v2/master.bin -o " +
                                          out + " 2>/dev/null");
    EXPECT_CODE(r, 0);
    return nlohmann::json::parse(r.output, nullptr, false);
  }
  uint64_t Size(const std::string& name) { return fs::file_size(dir_.File(name)); }

  TempDir dir_;
};

//! Against its base: the unchanged 13 MiB are references, the changed 5 MiB
//! new (random bytes and a rewrite do not pay as deltas); the summary line
//! and --json say so, and the stream is a small fraction of a full one.
TEST_F(IncrementalPack, StoresOnlyWhatChangedAndReportsIt) {
  nlohmann::json j = PackJson("--base base.vfs", "inc.vfs");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["raw_bytes"], 18u << 20);
  EXPECT_EQ(j["base_ref_bytes"], 13u << 20);
  EXPECT_EQ(j["new_bytes"].get<uint64_t>() + j["base_delta_bytes"].get<uint64_t>(), 5u << 20);
  EXPECT_EQ(j["base_id"].get<std::string>().size(), 64u);
  EXPECT_LT(Size("inc.vfs") * 2, Size("base.vfs"));

  CommandResult r = Sh(dir_.path(), "$VF pack --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin -o inc2.vfs");
  ASSERT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "against base " + j["base_id"].get<std::string>().substr(0, 16) + ": ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "13.00 MiB referenced")) << r.output;
  // The same inputs and base: the same stream.
  EXPECT_EQ(ReadFileBytes(dir_.File("inc.vfs")), ReadFileBytes(dir_.File("inc2.vfs")));
}

//! Zero runs and dedup references are neither taken from the base nor new:
//! pack's summary line names them apart, and its --json `new_bytes` is
//! inspect's, the raw bytes the stream holds as DATA frames. (Pack counted
//! them as new: 3 MiB more than inspect.)
TEST_F(IncrementalPack, ZerosAndDuplicatesAreNotCountedAsNew) {
  ASSERT_CODE(Sh(dir_.path(), "head -c 2M /dev/zero > v2/zeros.bin && $VF gen -k random -s 1M --seed 11 -o r1.bin && "
                              "cat r1.bin r1.bin > v2/twice.bin"),
              0);
  CommandResult r = Sh(dir_.path(), "$VF pack --json --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin "
                                    "v2/zeros.bin v2/twice.bin -o inc.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json pack = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(pack.is_object()) << r.output;
  EXPECT_EQ(pack["zero_bytes"], 2u << 20);
  EXPECT_EQ(pack["dedup_bytes"], 1u << 20);
  const uint64_t accounted = pack["new_bytes"].get<uint64_t>() + pack["base_ref_bytes"].get<uint64_t>() +
                             pack["base_delta_bytes"].get<uint64_t>() + pack["zero_bytes"].get<uint64_t>() +
                             pack["dedup_bytes"].get<uint64_t>();
  EXPECT_EQ(accounted, pack["raw_bytes"].get<uint64_t>());

  r = Sh(dir_.path(), "$VF inspect --json inc.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json inspect = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(inspect.is_object()) << r.output;
  EXPECT_EQ(inspect["new_bytes"], pack["new_bytes"]) << r.output;
  EXPECT_EQ(inspect["base_ref_bytes"], pack["base_ref_bytes"]);
  EXPECT_EQ(inspect["base_delta_bytes"], pack["base_delta_bytes"]);

  r = Sh(dir_.path(), "$VF pack --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin v2/zeros.bin "
                      "v2/twice.bin -o inc2.vfs");
  ASSERT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "delta-coded, 2.00 MiB zeros, 1.00 MiB deduplicated\n")) << r.output;
}

//! References-only finds the same references from the base's digests; a
//! base without digests is refused for it, before any output exists.
TEST_F(IncrementalPack, ReferencesOnlyNeedsDigestsInTheBase) {
  nlohmann::json full = PackJson("--base base.vfs", "full-mode.vfs");
  nlohmann::json refs = PackJson("--base base.vfs --base-refs-only", "refs.vfs");
  ASSERT_TRUE(full.is_object() && refs.is_object());
  EXPECT_EQ(refs["base_ref_bytes"], full["base_ref_bytes"]);
  EXPECT_EQ(refs["base_delta_bytes"], 0u);

  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q v1/weights.bin v1/optimizer.bin v1/master.bin -o plain.vfs"), 0);
  CommandResult r = Sh(dir_.path(), "$VF pack --base plain.vfs --base-refs-only v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "no chunk digests")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));
  // Full mode needs no digests.
  EXPECT_CODE(Sh(dir_.path(), "$VF pack -q --base plain.vfs v2/weights.bin -o out.vfs"), 0);
}

//! A base without an index (written through a pipe) cannot be matched
//! against: a clear error naming it, status 1, no output. So is a missing
//! base. --base-refs-only without --base is refused up front.
TEST_F(IncrementalPack, BasesThatCannotServeAreClearErrors) {
  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q v1/weights.bin -o - > piped.vfs"), 0);
  CommandResult r = Sh(dir_.path(), "$VF pack --base piped.vfs v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "piped.vfs")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));

  r = Sh(dir_.path(), "$VF pack --base missing.vfs v2/weights.bin -o out.vfs");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "missing.vfs")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));

  r = Sh(dir_.path(), "$VF pack --base-refs-only v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 2);
  EXPECT_TRUE(Contains(r.output, "--base-refs-only needs --base")) << r.output;
}

//! Inputs read in order (stdin, a named pipe) are matched to the base by
//! name, chunk by chunk, as files are: the same references and deltas as a
//! pack of the files, a stream that unpacks exactly with its base and
//! passes verify, and --base-refs-only too. (Pack refused --base for them.)
TEST_F(IncrementalPack, InputsReadInOrderUseTheBaseToo) {
  nlohmann::json files = PackJson("--base base.vfs", "files.vfs");
  ASSERT_TRUE(files.is_object());
  CommandResult r = Sh(dir_.path(), "mkfifo opt.fifo && (cat v2/optimizer.bin > opt.fifo &) && "
                                    "cat v2/weights.bin | $VF pack --json --base base.vfs --name weights.bin - "
                                    "opt.fifo v2/master.bin -o piped.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json piped = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(piped.is_object()) << r.output;
  EXPECT_TRUE(piped["sequential"].get<bool>());
  // The files' references: all 8 MiB of the weights, 2 of the optimizer's
  // 6, 3 of the master's 4. opt.fifo is no name of the base's: its 6 MiB
  // are new; the others match as the files do.
  EXPECT_EQ(files["base_ref_bytes"], 13u << 20);
  EXPECT_EQ(piped["base_ref_bytes"], 11u << 20) << r.output;
  EXPECT_GE(piped["new_bytes"].get<uint64_t>(), 6u << 20) << r.output;
  EXPECT_EQ(piped["raw_bytes"], 18u << 20);

  ASSERT_CODE(Sh(dir_.path(), "$VF verify -q piped.vfs && $VF unpack -q piped.vfs -o back/ && "
                              "cmp back/weights.bin v2/weights.bin && cmp back/opt.fifo v2/optimizer.bin && "
                              "cmp back/master.bin v2/master.bin"),
              0);

  r = Sh(dir_.path(), "cat v2/master.bin | $VF pack --json --base base.vfs --base-refs-only --name master.bin - "
                      "-o refs.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json refs = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(refs.is_object()) << r.output;
  EXPECT_EQ(refs["base_ref_bytes"], 3u << 20);  // master's unchanged MiBs; the changed one whole
  EXPECT_EQ(refs["base_delta_bytes"], 0u);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q refs.vfs -o refs/ && cmp refs/master.bin v2/master.bin"), 0);
}

//! pack --base, then unpack: byte-exact, with the base named (--base) or
//! found where the BASE frame says, which pack records relative to the
//! output's directory (so a directory of checkpoints can move as a whole);
//! verify checks it with its base. A refs-only stream and a stream on an
//! incremental base (a chain of two) unpack exactly too.
TEST_F(IncrementalPack, UnpacksExactlyWithItsBase) {
  ASSERT_CODE(Sh(dir_.path(), "mkdir out && $VF pack -q --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin "
                              "-o out/inc.vfs"),
              0);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q out/inc.vfs -o found/ && cmp found/master.bin v2/master.bin && "
                              "cmp found/optimizer.bin v2/optimizer.bin && cmp found/weights.bin v2/weights.bin"),
              0);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q --base base.vfs -o named/ out/inc.vfs && diff -r named v2"), 0);
  ASSERT_CODE(Sh(dir_.path(), "$VF verify -q out/inc.vfs"), 0);
  // The directory moves as a whole: the relative location still holds.
  ASSERT_CODE(Sh(dir_.path(), "mkdir moved && cp base.vfs moved/ && mkdir moved/out && cp out/inc.vfs moved/out/ && "
                              "mv base.vfs base.vfs.away && $VF unpack -q moved/out/inc.vfs -o moved-files/ && "
                              "diff -r moved-files v2 && mv base.vfs.away base.vfs"),
              0);

  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q --base base.vfs --base-refs-only v2/weights.bin v2/optimizer.bin "
                              "v2/master.bin -o refs.vfs && $VF unpack -q refs.vfs -o refs/ && diff -r refs v2"),
              0);

  // A third checkpoint on the second: 2 MiB of the weights change.
  ASSERT_CODE(Sh(dir_.path(), "mkdir v3 && cp v2/* v3/ && $VF gen -k bf16 -s 2M --seed 12 -o b.bin && "
                              "dd if=b.bin of=v3/weights.bin bs=1M seek=3 conv=notrunc status=none"),
              0);
  nlohmann::json j = nlohmann::json::parse(
      Sh(dir_.path(), "$VF pack --json --base out/inc.vfs v3/weights.bin v3/optimizer.bin v3/master.bin -o third.vfs "
                      "2>/dev/null")
          .output,
      nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["base_ref_bytes"], 16u << 20);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q third.vfs -o third/ && diff -r third v3"), 0);
}

}  // namespace
}  // namespace vramflow
