// SPDX-License-Identifier: MIT
// End-to-end tests of the `vramflow` command line: exit codes, messages and
// files on disk, run through a shell against the built binary.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/endian.h"
#include "common/hash.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using ::vramflow::testing::ModelBytes;
using ::vramflow::testing::PackToMemory;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::TestObject;
using ::vramflow::testing::VramflowBinary;
using ::vramflow::testing::WriteFileBytes;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;  // short: it quotes every word below

// Runs `vramflow <args>` (args are already shell words) with the given working directory.
CommandResult Vf(const std::string& args, const std::string& cwd = "") {
  CommandResult r;
  std::string line = (cwd.empty() ? "" : "cd " + Q(cwd) + " && ") + Q(VramflowBinary()) + " " + args;
  // The subshell keeps redirections inside `args` apart from RunCommand's own 2>&1.
  r.code = RunCommand("( " + line + " )", &r.output);
  return r;
}

// Runs a shell line in which $VF is the binary; its own redirections hold
// (stdout and stderr not redirected there are captured together).
CommandResult Sh(const std::string& line) {
  CommandResult r;
  r.code = RunCommand("( VF=" + Q(VramflowBinary()) + "; " + line + " )", &r.output);
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every entry below `dir`, relative to it, sorted; empty for a missing dir.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    out.push_back(fs::relative(it->path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

// Names of leftover staging directories ('.<name>.vf-unpack-XXXXXX') directly in `dir`.
std::vector<std::string> StagingLeftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& e : Tree(dir))
    if (Contains(e, ".vf-unpack-")) out.push_back(e);
  return out;
}

std::vector<uint8_t> MakeStream(const std::vector<TestObject>& objects, uint32_t chunk_size = 4096) {
  return PackToMemory(objects, EncoderOptions{}, chunk_size);
}

#define EXPECT_CODE(result, expected) EXPECT_EQ((result).code, (expected)) << (result).output

// ---------------------------------------------------------------- help / usage

TEST(CliTest, HelpForAppAndEverySubcommand) {
  struct Case {
    std::string args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"--help", {"pack", "unpack", "inspect", "verify", "gen", "bench", "demo", "Exit status"}},
      {"pack --help",
       {"--output", "--name", "--force", "--codec", "--transform", "--chunk-size", "--quiet", "--no-dedup",
        "--threads"}},
      {"unpack --help", {"--output", "--force", "--quiet", "--threads", "stream"}},
      {"demo --help", {"--gpus", "--size", "--codec", "--json"}},
      {"inspect --help", {"--json", "--decode", "stream"}},
      {"verify --help", {"--quiet", "stream"}},
      {"gen --help", {"--kind", "--size", "--seed", "--output"}},
      {"bench --help", {"codecs", "pipeline"}},
      {"bench pipeline --help", {"--gpus", "--json", "--threads"}},
      {"bench codecs --help",
       {"--size", "--chunk-size", "--kinds", "--codecs", "--min-seconds", "--no-peers", "--json"}},
  };
  for (const Case& c : cases) {
    CommandResult r = Vf(c.args);
    EXPECT_EQ(r.code, 0) << c.args << "\n" << r.output;
    for (const std::string& m : c.mentions)
      EXPECT_TRUE(Contains(r.output, m)) << c.args << " lacks " << m << "\n" << r.output;
  }
  CommandResult v = Vf("--version");
  EXPECT_CODE(v, 0);
  EXPECT_TRUE(Contains(v.output, "vramflow")) << v.output;
}

TEST(CliTest, UsageErrorsExitTwo) {
  TempDir dir;
  struct Case {
    std::string args;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {"", "subcommand"},
      {"bogus", ""},
      {"pack in.bin", "--output"},
      {"pack -o out.vfs", "inputs"},
      {"unpack -o out", "stream"},
      {"unpack s.vfs", "--output"},
      {"inspect", "stream"},
      {"verify", "stream"},
      {"gen -k bf16", "--output"},
      {"gen -s 12Q -o x.bin", "12Q"},
      {"bench", "subcommand"},
      {"bench codecs --size nope", "nope"},
      {"pack --no-such-flag in.bin -o out.vfs", "--no-such-flag"},
      // Values that the command line parser accepts but vramflow does not.
      {"pack in.bin -o out.vfs --codec foo", "unknown codec"},
      {"pack in.bin -o out.vfs --transform foo", "foo"},
      {"pack in.bin -o out.vfs --chunk-size 65M", "--chunk-size"},
      {"gen -k nope -o x.bin", "unknown data kind"},
      {"bench codecs --kinds bf16,nope", "unknown data kind"},
  };
  for (const Case& c : cases) {
    CommandResult r = Vf(c.args, dir.path());
    EXPECT_EQ(r.code, 2) << "vramflow " << c.args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, c.mention)) << "vramflow " << c.args << " lacks " << c.mention << "\n" << r.output;
  }
  EXPECT_TRUE(Tree(dir.path()).empty());  // nothing written by a refused command line
}

// ---------------------------------------------------------------- round trips

class CliRoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AssertCode(Vf("gen -k bf16 -s 300K -o a.bin", dir_.path()), 0);
    AssertCode(Vf("gen -k fp32 -s 130K --seed 7 -o b.bin", dir_.path()), 0);
    AssertCode(Vf("gen -k zeros -s 64K -o c.bin", dir_.path()), 0);
    AssertCode(Vf("gen -k random -s 5000 -o d.bin", dir_.path()), 0);
    ASSERT_EQ(ReadFileBytes(File("a.bin")).size(), 300u * 1024);
  }
  static void AssertCode(const CommandResult& r, int code) { ASSERT_EQ(r.code, code) << r.output; }
  std::string File(const std::string& name) const { return dir_.File(name); }
  CommandResult Run(const std::string& args) { return Vf(args, dir_.path()); }
  bool Same(const std::string& a, const std::string& b) {
    std::string out;
    return RunCommand("cmp " + Q(File(a)) + " " + Q(File(b)), &out) == 0;
  }

  TempDir dir_;
  const std::vector<std::string> inputs_ = {"a.bin", "b.bin", "c.bin", "d.bin"};
};

TEST_F(CliRoundTripTest, PackVerifyUnpackToDirectory) {
  for (const char* codec : {"auto", "zstd", "lz4", "raw", "huffman"}) {
    SCOPED_TRACE(codec);
    std::string stream = std::string("s-") + codec + ".vfs";
    std::string out = std::string("out-") + codec;
    CommandResult p = Run("pack a.bin b.bin c.bin d.bin -o " + stream + " --chunk-size 64K --codec " + codec);
    EXPECT_CODE(p, 0);
    EXPECT_TRUE(Contains(p.output, "packed 4 object(s)")) << p.output;

    CommandResult v = Run("verify " + stream);
    EXPECT_CODE(v, 0);
    EXPECT_TRUE(Contains(v.output, "OK:")) << v.output;
    EXPECT_TRUE(Contains(v.output, "4 objects")) << v.output;

    CommandResult u = Run("unpack " + stream + " -o " + out + "/");
    EXPECT_CODE(u, 0);
    EXPECT_TRUE(Contains(u.output, "unpacked 4 object(s)")) << u.output;
    for (const std::string& name : inputs_) EXPECT_TRUE(Same(name, out + "/" + name)) << name;
    EXPECT_EQ(Tree(File(out)).size(), inputs_.size());
  }
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
}

TEST_F(CliRoundTripTest, IdenticalChunksBecomeDedupReferences) {
  fs::create_directory(File("copy"));
  fs::copy_file(File("a.bin"), File("copy/a2.bin"));
  for (const char* flags : {"", " --no-dedup", " --threads 1"}) {
    SCOPED_TRACE(flags);
    fs::remove_all(File("dd.vfs"));
    fs::remove_all(File("dd"));
    EXPECT_CODE(Run(std::string("pack -q a.bin copy/a2.bin d.bin -o dd.vfs --chunk-size 32K") + flags), 0);
    EXPECT_CODE(Run("verify -q dd.vfs"), 0);
    CommandResult j = Sh("cd " + Q(dir_.path()) + " && $VF inspect --json --full dd.vfs 2>/dev/null");
    ASSERT_EQ(j.code, 0) << j.output;
    nlohmann::json doc = nlohmann::json::parse(j.output);
    const bool dedup = std::string(flags) != " --no-dedup";
    EXPECT_EQ(doc["codecs"].contains("dedup-ref"), dedup) << doc["codecs"].dump();
    // The dedup window declared: the default, cut down to the inputs' chunks.
    uint64_t chunks = 0;
    for (const char* name : {"a.bin", "copy/a2.bin", "d.bin"}) chunks += (fs::file_size(File(name)) + 32767) / 32768;
    if (dedup) {
      EXPECT_EQ(doc["dedup_window"], chunks);
      CommandResult text = Run("inspect dd.vfs");
      EXPECT_TRUE(Contains(text.output, "dedup window " + std::to_string(chunks) + " DATA frames")) << text.output;
    } else {
      EXPECT_TRUE(doc["dedup_window"].is_null()) << doc["dedup_window"];
    }
    EXPECT_CODE(Run("unpack -q dd.vfs -o dd"), 0);
    EXPECT_TRUE(Same("a.bin", "dd/a.bin"));
    EXPECT_TRUE(Same("a.bin", "dd/a2.bin"));
    EXPECT_TRUE(Same("d.bin", "dd/d.bin"));
  }
}

TEST_F(CliRoundTripTest, OneObjectStreamUnpacksToAFile) {
  AssertCode(Run("pack -q b.bin -o one.vfs --chunk-size 16K"), 0);
  CommandResult u = Run("unpack one.vfs -o restored.bin");
  EXPECT_CODE(u, 0);
  EXPECT_TRUE(fs::is_regular_file(File("restored.bin")));
  EXPECT_TRUE(Same("b.bin", "restored.bin"));
  // An existing directory receives the object under its name instead.
  fs::create_directory(File("existing"));
  EXPECT_CODE(Run("unpack one.vfs -o existing"), 0);
  EXPECT_TRUE(Same("b.bin", "existing/b.bin"));
}

TEST_F(CliRoundTripTest, ManyObjectStreamToNewPathCreatesADirectory) {
  AssertCode(Run("pack -q a.bin d.bin -o two.vfs"), 0);
  CommandResult u = Run("unpack two.vfs -o fresh");
  EXPECT_CODE(u, 0);
  ASSERT_TRUE(fs::is_directory(File("fresh")));
  EXPECT_TRUE(Same("a.bin", "fresh/a.bin"));
  EXPECT_TRUE(Same("d.bin", "fresh/d.bin"));
  // Same with a path several levels deep whose parent exists.
  fs::create_directory(File("p"));
  EXPECT_CODE(Run("unpack two.vfs -o p/q"), 0);
  EXPECT_TRUE(Same("d.bin", "p/q/d.bin"));
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
  EXPECT_TRUE(StagingLeftovers(File("p")).empty());
}

TEST_F(CliRoundTripTest, PackToStdoutPipesIntoVerify) {
  CommandResult r = Sh("cd " + Q(dir_.path()) + " && $VF pack -q a.bin b.bin -o - --codec zstd:3 | $VF verify -");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "OK:")) << r.output;
  EXPECT_TRUE(Contains(r.output, "2 objects")) << r.output;
  // And into unpack from stdin.
  r = Sh("cd " + Q(dir_.path()) + " && $VF pack -q a.bin b.bin -o - | $VF unpack - -o piped/");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Same("a.bin", "piped/a.bin"));
  EXPECT_TRUE(Same("b.bin", "piped/b.bin"));
}

TEST_F(CliRoundTripTest, PackFromStdinRoundTrips) {
  CommandResult p =
      Sh("cd " + Q(dir_.path()) + " && cat a.bin | $VF pack - --name weights.bf16 -o in.vfs --chunk-size 32K");
  EXPECT_CODE(p, 0);
  EXPECT_CODE(Run("verify in.vfs"), 0);
  CommandResult j = Run("inspect --json in.vfs");
  AssertCode(j, 0);
  nlohmann::json doc = nlohmann::json::parse(j.output);
  ASSERT_EQ(doc["objects"].size(), 1u);
  EXPECT_EQ(doc["objects"][0]["name"], "weights.bf16");
  EXPECT_EQ(doc["objects"][0]["size"], 300 * 1024);  // known once the object ended
  EXPECT_CODE(Run("unpack in.vfs -o out/"), 0);
  EXPECT_TRUE(Same("a.bin", "out/weights.bf16"));
  // Stdin mixed with files.
  p = Sh("cd " + Q(dir_.path()) + " && $VF pack -q d.bin - c.bin -o mixed.vfs < b.bin");
  EXPECT_CODE(p, 0);
  EXPECT_CODE(Run("unpack mixed.vfs -o mixed"), 0);
  EXPECT_TRUE(Same("b.bin", "mixed/stdin"));
  EXPECT_TRUE(Same("c.bin", "mixed/c.bin"));
  EXPECT_TRUE(Same("d.bin", "mixed/d.bin"));
  // Empty stdin is an empty object.
  p = Sh("cd " + Q(dir_.path()) + " && $VF pack -q - --name empty -o empty.vfs < /dev/null");
  EXPECT_CODE(p, 0);
  EXPECT_CODE(Run("unpack empty.vfs -o empty.out"), 0);
  EXPECT_EQ(fs::file_size(File("empty.out")), 0u);
}

TEST_F(CliRoundTripTest, UnpackToStdout) {
  AssertCode(Run("pack -q a.bin -o one.vfs --chunk-size 8K"), 0);
  CommandResult r = Sh("cd " + Q(dir_.path()) + " && $VF unpack one.vfs -o - > stdout.bin");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Same("a.bin", "stdout.bin"));
  // Zero runs are written out as zeros.
  AssertCode(Run("pack -q c.bin -o zeros.vfs --chunk-size 8K"), 0);
  EXPECT_CODE(Sh("cd " + Q(dir_.path()) + " && $VF unpack zeros.vfs -o - > zeros.out"), 0);
  EXPECT_TRUE(Same("c.bin", "zeros.out"));
  // One thread reads and decodes; more decode ahead (streamer/decode_ahead.h):
  // the same bytes either way, in order.
  for (const char* threads : {"1", "3"}) {
    EXPECT_CODE(Sh("cd " + Q(dir_.path()) + " && $VF unpack one.vfs -o - -j " + threads + " > j.bin"), 0);
    EXPECT_TRUE(Same("a.bin", "j.bin")) << threads << " threads";
    EXPECT_CODE(Sh("cd " + Q(dir_.path()) + " && $VF unpack zeros.vfs -o - -j " + threads + " > j.out"), 0);
    EXPECT_TRUE(Same("c.bin", "j.out")) << threads << " threads";
  }
  // A stream of several objects cannot go to stdout.
  AssertCode(Run("pack -q a.bin b.bin -o two.vfs"), 0);
  r = Sh("cd " + Q(dir_.path()) + " && $VF unpack two.vfs -o - > /dev/null");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "more than one object")) << r.output;
}

TEST_F(CliRoundTripTest, UnpackWritesIntoDevicesAndNamedPipesWithoutReplacingThem) {
  AssertCode(Run("pack -q b.bin -o one.vfs --no-dedup"), 0);
  AssertCode(Run("pack -q a.bin b.bin -o two.vfs"), 0);

  // A named pipe: the object flows through it, and the pipe stays a pipe.
  ASSERT_EQ(::mkfifo(File("fifo").c_str(), 0600), 0);
  CommandResult r = Sh("cd " + Q(dir_.path()) +
                       " && { cat fifo > from-fifo.bin & $VF unpack one.vfs -o fifo; s=$?; wait; exit $s; }");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Same("b.bin", "from-fifo.bin"));
  EXPECT_EQ(fs::symlink_status(File("fifo")).type(), fs::file_type::fifo);

  // A character device (a null device node of our own, not /dev/null): with
  // or without --force it is written to, never renamed over.
  if (::mknod(File("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot make a device node here (mknod: " << std::strerror(errno) << "); the pipe case passed";
  }
  EXPECT_CODE(Run("unpack one.vfs -o null"), 0);
  EXPECT_CODE(Run("unpack one.vfs -o null --force"), 0);
  r = Run("unpack two.vfs -o null --force");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "more than one object")) << r.output;
  EXPECT_EQ(fs::symlink_status(File("null")).type(), fs::file_type::character);
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
}

// ---------------------------------------------------------------- refusals

TEST_F(CliRoundTripTest, UnpackRefusesToOverwriteWithoutForce) {
  AssertCode(Run("pack -q a.bin -o one.vfs"), 0);
  WriteFileBytes(File("target.bin"), {1, 2, 3});
  CommandResult r = Run("unpack one.vfs -o target.bin");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "exists")) << r.output;
  EXPECT_EQ(ReadFileBytes(File("target.bin")), (std::vector<uint8_t>{1, 2, 3}));

  r = Run("unpack one.vfs -o target.bin --force");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Same("a.bin", "target.bin"));

  // Into a directory: an existing file of the same name is kept too.
  fs::create_directory(File("dir"));
  WriteFileBytes(File("dir/a.bin"), {9});
  r = Run("unpack one.vfs -o dir/");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "exists")) << r.output;
  EXPECT_EQ(ReadFileBytes(File("dir/a.bin")), (std::vector<uint8_t>{9}));
  EXPECT_CODE(Run("unpack one.vfs -o dir/ -f"), 0);
  EXPECT_TRUE(Same("a.bin", "dir/a.bin"));
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
}

TEST_F(CliRoundTripTest, PackRefusesToOverwriteWithoutForce) {
  WriteFileBytes(File("out.vfs"), {7, 7});
  CommandResult r = Run("pack a.bin -o out.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "exists")) << r.output;
  EXPECT_EQ(ReadFileBytes(File("out.vfs")), (std::vector<uint8_t>{7, 7}));
  EXPECT_CODE(Run("pack -q a.bin -o out.vfs --force"), 0);
  EXPECT_CODE(Run("verify -q out.vfs"), 0);
}

TEST_F(CliRoundTripTest, PackRefusesTwoInputsWithTheSameName) {
  fs::create_directory(File("sub"));
  fs::copy_file(File("b.bin"), File("sub/a.bin"));
  CommandResult r = Run("pack a.bin sub/a.bin -o dup.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "'a.bin'")) << r.output;
  EXPECT_TRUE(Contains(r.output, "'sub/a.bin'")) << r.output;
  EXPECT_FALSE(fs::exists(File("dup.vfs")));
  // stdin's name counts too.
  r = Run("pack a.bin - --name a.bin -o dup.vfs < /dev/null");
  EXPECT_CODE(r, 1);
  EXPECT_FALSE(fs::exists(File("dup.vfs")));
}

// Inspect counts chunks by the word size of their transform: fp8's sign
// planes are 1-byte words, which a chunk without a transform is not.
TEST_F(CliRoundTripTest, InspectNamesTheWordSizeOfEachTransform) {
  AssertCode(Run("gen -k fp8 -s 128K -o e.bin"), 0);
  EXPECT_CODE(Run("pack a.bin d.bin e.bin -o s.vfs --chunk-size 64K"), 0);
  CommandResult r = Run("inspect --full --json s.vfs");
  EXPECT_CODE(r, 0);
  const nlohmann::json words = nlohmann::json::parse(r.output.substr(r.output.find('{')))["word_sizes"];
  EXPECT_EQ(words.value("1-byte", 0), 2) << words;  // e.bin's two chunks, signplanes1
  EXPECT_EQ(words.value("2-byte", 0), 5) << words;  // a.bin's five bf16 chunks
  EXPECT_EQ(words.value("none", 0), 1) << words;    // d.bin, random bytes stored raw
  r = Run("inspect --full s.vfs");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "signplanes1[huffman,bitpack]")) << r.output;
  EXPECT_TRUE(Contains(r.output, "none x1 1-byte x2 2-byte x5")) << r.output;
}

TEST_F(CliRoundTripTest, PackOfAMissingInputFailsAndWritesNothing) {
  CommandResult r = Run("pack a.bin missing.bin -o m.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "missing.bin")) << r.output;
  EXPECT_FALSE(fs::exists(File("m.vfs")));
  for (const std::string& e : Tree(dir_.path())) EXPECT_FALSE(Contains(e, "m.vfs")) << e;  // no temporary left
}

// ---------------------------------------------------------------- untrusted names

TEST(CliUntrustedNamesTest, BadNamesAreRefusedAndNothingIsCreated) {
  TempDir dir;
  const std::vector<std::string> bad = {"../evil", "/abs/path", "a/../../b",           "a//b", ".", "..",
                                        "a/./b",   "x/",        "../../../tmp/vf-evil"};
  const std::vector<uint8_t> bytes = ModelBytes(DataKind::kBf16Weights, 10000);
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(bad[i]);
    std::string case_dir = dir.File("case" + std::to_string(i));
    fs::create_directories(case_dir + "/in");
    WriteFileBytes(case_dir + "/in/evil.vfs", MakeStream({{"ok.bin", bytes}, {bad[i], bytes}}));
    // To a new directory, to an existing one, and (one object) to a file path.
    for (const std::string& out : {std::string("out/"), std::string("out")}) {
      CommandResult r = Vf("unpack in/evil.vfs -o " + out, case_dir);
      EXPECT_CODE(r, 1);
      EXPECT_TRUE(Contains(r.output, "refused")) << r.output;
      if (bad[i] == "..") {
        EXPECT_TRUE(Contains(r.output, "'..' path component")) << r.output;
      }
      if (bad[i] == "a/./b") {
        EXPECT_TRUE(Contains(r.output, "'.' path component")) << r.output;
      }
      EXPECT_EQ(Tree(case_dir), (std::vector<std::string>{"in", "in/evil.vfs"}));
    }
    fs::create_directory(case_dir + "/out");
    CommandResult r = Vf("unpack in/evil.vfs -o out", case_dir);
    EXPECT_CODE(r, 1);
    EXPECT_TRUE(Contains(r.output, "refused")) << r.output;
    EXPECT_EQ(Tree(case_dir), (std::vector<std::string>{"in", "in/evil.vfs", "out"}));

    WriteFileBytes(case_dir + "/in/single.vfs", MakeStream({{bad[i], bytes}}));
    r = Vf("unpack in/single.vfs -o in/x/", case_dir);
    EXPECT_CODE(r, 1);
    EXPECT_TRUE(Contains(r.output, "refused")) << r.output;
    EXPECT_EQ(Tree(case_dir), (std::vector<std::string>{"in", "in/evil.vfs", "in/single.vfs", "out"}));
  }
  EXPECT_FALSE(fs::exists("/abs/path"));
  EXPECT_FALSE(fs::exists("/tmp/vf-evil"));
  EXPECT_FALSE(fs::exists(dir.File("evil")));
  EXPECT_FALSE(fs::exists(dir.File("b")));
}

TEST(CliUntrustedNamesTest, NestedNameIsCreatedInsideTheOutputDirectory) {
  TempDir dir;
  const std::vector<uint8_t> one = ModelBytes(DataKind::kFp32Weights, 9000, 3);
  const std::vector<uint8_t> two = ModelBytes(DataKind::kRandom, 5000, 4);
  WriteFileBytes(dir.File("nested.vfs"), MakeStream({{"sub/dir/file", one}, {"sub/other", two}, {"top", two}}));
  CommandResult r = Vf("unpack nested.vfs -o out", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_EQ(ReadFileBytes(dir.File("out/sub/dir/file")), one);
  EXPECT_EQ(ReadFileBytes(dir.File("out/sub/other")), two);
  EXPECT_EQ(ReadFileBytes(dir.File("out/top")), two);
  EXPECT_EQ(Tree(dir.path()), (std::vector<std::string>{"nested.vfs", "out", "out/sub", "out/sub/dir",
                                                        "out/sub/dir/file", "out/sub/other", "out/top"}));
}

TEST(CliUntrustedNamesTest, PlantedSymlinksAreNotFollowed) {
  TempDir dir;
  const std::vector<uint8_t> bytes = ModelBytes(DataKind::kBf16Weights, 7000);
  fs::create_directories(dir.File("outside"));
  fs::create_directories(dir.File("out"));
  fs::create_directory_symlink(dir.File("outside"), dir.File("out/sub"));
  WriteFileBytes(dir.File("s.vfs"), MakeStream({{"sub/x", bytes}}));
  for (const char* flags : {"", " --force"}) {
    SCOPED_TRACE(flags);
    CommandResult r = Vf(std::string("unpack s.vfs -o out") + flags, dir.path());
    EXPECT_CODE(r, 1);
    EXPECT_TRUE(Contains(r.output, "symlink")) << r.output;
    EXPECT_TRUE(Tree(dir.File("outside")).empty());
    EXPECT_TRUE(fs::is_symlink(dir.File("out/sub")));
    EXPECT_TRUE(StagingLeftovers(dir.path()).empty());
  }
  // A symlink in the place of the file itself: refused without --force;
  // with --force the link is replaced, its target untouched.
  WriteFileBytes(dir.File("outside/target"), {5, 5, 5});
  fs::create_symlink(dir.File("outside/target"), dir.File("out/x"));
  WriteFileBytes(dir.File("x.vfs"), MakeStream({{"x", bytes}}));
  CommandResult r = Vf("unpack x.vfs -o out", dir.path());
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "exists")) << r.output;
  r = Vf("unpack x.vfs -o out --force", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_FALSE(fs::is_symlink(dir.File("out/x")));
  EXPECT_EQ(ReadFileBytes(dir.File("out/x")), bytes);
  EXPECT_EQ(ReadFileBytes(dir.File("outside/target")), (std::vector<uint8_t>{5, 5, 5}));
}

// ---------------------------------------------------------------- corrupt input

class CliCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = ModelBytes(DataKind::kBf16Weights, 100000, 1);
    b_ = ModelBytes(DataKind::kFp32Weights, 60000, 2);
    good_ = MakeStream({{"a.bin", a_}, {"b.bin", b_}}, 16384);
    WriteFileBytes(dir_.File("good.vfs"), good_);
    // Cut inside a payload, and exactly before STREAM_END (64-byte header + 32-byte payload).
    WriteFileBytes(dir_.File("cut.vfs"), std::vector<uint8_t>(good_.begin(), good_.begin() + good_.size() / 2));
    WriteFileBytes(dir_.File("noend.vfs"), std::vector<uint8_t>(good_.begin(), good_.end() - 96));
  }
  CommandResult Run(const std::string& args) { return Vf(args, dir_.path()); }
  TempDir dir_;
  std::vector<uint8_t> a_, b_, good_;
};

TEST_F(CliCorruptTest, VerifyReportsTruncation) {
  EXPECT_CODE(Run("verify good.vfs"), 0);
  for (const char* name : {"cut.vfs", "noend.vfs"}) {
    CommandResult r = Run(std::string("verify ") + name);
    EXPECT_CODE(r, 3);  // corrupt or incomplete data
    EXPECT_TRUE(Contains(r.output, "incomplete") || Contains(r.output, "truncated")) << r.output;
    EXPECT_FALSE(Contains(r.output, "OK:")) << r.output;
  }
  CommandResult r = Run("verify noend.vfs");
  EXPECT_TRUE(Contains(r.output, "STREAM_END")) << r.output;
  // An empty file and a file that is not a stream.
  WriteFileBytes(dir_.File("empty.vfs"), {});
  EXPECT_CODE(Run("verify empty.vfs"), 3);  // corrupt or incomplete data
  WriteFileBytes(dir_.File("text.vfs"), std::vector<uint8_t>(200, 'x'));
  r = Run("verify text.vfs");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_TRUE(Contains(r.output, "magic")) << r.output;
  // Trailing garbage after STREAM_END.
  std::vector<uint8_t> tail = good_;
  tail.push_back(0);
  WriteFileBytes(dir_.File("tail.vfs"), tail);
  EXPECT_CODE(Run("verify tail.vfs"), 3);  // corrupt or incomplete data
}

// verify checks each DIGEST_BLOCK entry against the SHA-256 of its chunk's
// bytes, on one thread or decoding ahead on several: an entry changed (its
// block re-hashed, so that only the bytes can tell) fails either way.
TEST_F(CliCorruptTest, VerifyChecksEveryDigestWithAnyThreads) {
  WriteFileBytes(dir_.File("a.bin"), a_);
  {
    CommandResult packed = Run("pack -q --digests --chunk-size 16K a.bin -o digests.vfs");
    ASSERT_EQ(packed.code, 0) << packed.output;
  }
  std::vector<uint8_t> broken = ReadFileBytes(dir_.File("digests.vfs"));
  // The last chunk's entry (a DATA frame: model bytes have no zeros).
  ASSERT_EQ(testing::BreakLastDigestOfEachBlock(&broken), 1);
  WriteFileBytes(dir_.File("broken.vfs"), broken);
  for (const char* threads : {"1", "2", "4"}) {
    SCOPED_TRACE(std::string("-j ") + threads);
    EXPECT_CODE(Run(std::string("verify -q -j ") + threads + " digests.vfs"), 0);
    CommandResult r = Run(std::string("verify -j ") + threads + " broken.vfs");
    EXPECT_CODE(r, 3);  // corrupt
    EXPECT_TRUE(Contains(r.output, "does not match the SHA-256 of the chunk's bytes")) << r.output;
    EXPECT_TRUE(Contains(r.output, "DIGEST_BLOCK")) << r.output;
  }
}

TEST_F(CliCorruptTest, VerifyReportsAFlippedPayloadBit) {
  // One object of one raw chunk: a byte in the middle of the stream is payload.
  std::vector<uint8_t> raw_stream = PackToMemory(
      {{"a.bin", a_}}, EncoderOptions{.codec = CodecChoice::kRaw, .transform = TransformChoice::kNone}, 1u << 20);
  raw_stream[raw_stream.size() / 2] ^= 0x10;
  WriteFileBytes(dir_.File("flip-raw.vfs"), raw_stream);
  CommandResult r = Run("verify flip-raw.vfs");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_TRUE(Contains(r.output, "hash mismatch")) << r.output;
  EXPECT_TRUE(Contains(r.output, "frame")) << r.output;

  // Compressed payloads: a flip anywhere is caught, by the decoder or by the hash.
  std::vector<uint8_t> flipped = good_;
  flipped[flipped.size() / 3] ^= 0x01;
  WriteFileBytes(dir_.File("flip.vfs"), flipped);
  r = Run("verify flip.vfs");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_TRUE(Contains(r.output, "hash mismatch") || Contains(r.output, "corruption")) << r.output;
  EXPECT_TRUE(Contains(r.output, "frame")) << r.output;

  // unpack refuses it too and leaves nothing.
  r = Run("unpack flip-raw.vfs -o flip-out");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_FALSE(fs::exists(dir_.File("flip-out")));
}

TEST_F(CliCorruptTest, UnpackOfATruncatedStreamLeavesNothing) {
  for (const char* name : {"cut.vfs", "noend.vfs"}) {
    SCOPED_TRACE(name);
    for (const char* out : {"o1", "o2/"}) {
      CommandResult r = Run(std::string("unpack ") + name + " -o " + out);
      EXPECT_CODE(r, 3);  // corrupt or incomplete data
      EXPECT_TRUE(Contains(r.output, "incomplete") || Contains(r.output, "truncated")) << r.output;
    }
    EXPECT_EQ(Tree(dir_.path()),
              (std::vector<std::string>{"cut.vfs", "good.vfs", "noend.vfs"}));  // no output, no staging dir
  }
  // Into an existing directory: still nothing appears in it.
  fs::create_directory(dir_.File("existing"));
  CommandResult r = Run("unpack noend.vfs -o existing");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_TRUE(Tree(dir_.File("existing")).empty());
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
  // From stdin.
  r = Sh("cd " + Q(dir_.path()) + " && $VF unpack - -o piped < cut.vfs");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_FALSE(fs::exists(dir_.File("piped")));
  EXPECT_TRUE(StagingLeftovers(dir_.path()).empty());
}

TEST_F(CliCorruptTest, InspectPrintsATableAndFlagsIncompleteStreams) {
  CommandResult r = Run("inspect good.vfs");
  EXPECT_CODE(r, 0);
  for (const char* m : {"complete", "a.bin", "b.bin", "codec mix", "word sizes", "name", "chunks"})
    EXPECT_TRUE(Contains(r.output, m)) << m << "\n" << r.output;
  EXPECT_FALSE(Contains(r.output, "INCOMPLETE")) << r.output;

  r = Run("inspect cut.vfs");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  EXPECT_TRUE(Contains(r.output, "INCOMPLETE")) << r.output;
  EXPECT_TRUE(Contains(r.output, "a.bin")) << r.output;  // the table of what was read is still printed
  EXPECT_TRUE(Contains(r.output, "codec mix")) << r.output;
  EXPECT_TRUE(Contains(r.output, "not ended")) << r.output;
}

TEST_F(CliCorruptTest, InspectJson) {
  CommandResult r = Sh("cd " + Q(dir_.path()) + " && $VF inspect --json good.vfs 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);  // throws (fails the test) on invalid JSON
  EXPECT_EQ(j["complete"], true);
  ASSERT_TRUE(j["objects"].is_array());
  ASSERT_EQ(j["objects"].size(), 2u);
  EXPECT_EQ(j["objects"][0]["name"], "a.bin");
  EXPECT_EQ(j["objects"][0]["size"], a_.size());
  EXPECT_EQ(j["objects"][1]["name"], "b.bin");
  EXPECT_EQ(j["objects"][1]["size"], b_.size());
  EXPECT_EQ(j["raw_bytes"], a_.size() + b_.size());
  EXPECT_EQ(j["stream_bytes"], good_.size());
  EXPECT_TRUE(j["codecs"].is_object());
  EXPECT_FALSE(j["codecs"].empty());
  EXPECT_TRUE(j["word_sizes"].is_object());
  EXPECT_FALSE(j["word_sizes"].empty());

  r = Sh("cd " + Q(dir_.path()) + " && $VF inspect --json cut.vfs 2>/dev/null");
  EXPECT_CODE(r, 3);  // corrupt or incomplete data
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["code"], "truncated");
  EXPECT_EQ(j["objects"][0]["ended"], false);

  r = Sh("cd " + Q(dir_.path()) + " && $VF inspect --json --decode good.vfs 2>/dev/null");
  EXPECT_CODE(r, 0);
  EXPECT_EQ(nlohmann::json::parse(r.output)["complete"], true);
}

// ---------------------------------------------------------------- decode-ahead

// Issue 55, item 9: a stream whose header says 4 KiB chunks (informational
// only) over frames of 64 MiB, the most a frame may hold. One thread reads
// it within 200 MiB; decoding ahead on more threads gets the same verdict
// (fewer threads where theirs do not fit), and unpack -o - writes it all.
TEST(CliDecodeAheadTest, FramesLargerThanTheHeaderSaysGetTheVerdictOfOneThread) {
  TempDir dir;
  constexpr size_t kFrame = 64 << 20;
  std::vector<uint8_t> content(2 * kFrame);
  // A pattern of 4099 bytes repeated, one per frame: zstd keeps the file small.
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t frame = 0; frame < 2; ++frame) {
    uint8_t* start = content.data() + frame * kFrame;
    for (size_t i = 0; i < 4099; ++i, x = x * 6364136223846793005ull + 1442695040888963407ull)
      start[i] = static_cast<uint8_t>(x >> 56);
    for (size_t done = 4099; done < kFrame; done *= 2) std::memcpy(start + done, start, std::min(done, kFrame - done));
  }
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = 4096;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{.codec = CodecChoice::kZstd, .transform = TransformChoice::kNone});
  ASSERT_TRUE(writer.Start().ok());
  const uint32_t id = writer.BeginObject(ObjectMetadata{"big.bin", {}}, content.size()).value();
  for (size_t off = 0; off < content.size(); off += kFrame) {
    EncodedChunk chunk;
    ASSERT_TRUE(encoder.Encode(std::span<const uint8_t>(content).subspan(off, kFrame), &chunk).ok());
    ASSERT_TRUE(writer.AddChunk(id, off, kFrame, chunk).ok());
  }
  ASSERT_TRUE(writer.EndObject(id).ok());
  ASSERT_TRUE(writer.Finish().ok());
  WriteFileBytes(dir.File("big.vfs"), sink.bytes());

  EXPECT_CODE(Vf("verify -q -j 1 -m 200M big.vfs", dir.path()), 0);
  EXPECT_CODE(Vf("verify -q -j 2 -m 200M big.vfs", dir.path()), 0);
  WriteFileBytes(dir.File("big.bin"), content);
  const std::string in_dir = "cd " + Q(dir.path()) + " && ";
  EXPECT_CODE(Sh(in_dir + "$VF unpack -q -j 2 -m 200M big.vfs -o - > out.bin && cmp out.bin big.bin"), 0);
  // From a pipe the payloads are copied, not mapped: more threads still read it.
  EXPECT_CODE(Sh(in_dir + "$VF verify -q -j 4 -m 200M - < big.vfs"), 0);
}

// ---------------------------------------------------------------- dedup references

// Object "a" of four 4K chunks; object "b" = a's chunks 2, 0 by DEDUP_REF,
// then one chunk of its own, then a's chunk 1 again (after "a" has ended).
// Object "c" repeats its own first chunk by reference.
std::vector<uint8_t> MakeDedupStream(std::vector<uint8_t>* a, std::vector<uint8_t>* b, std::vector<uint8_t>* c) {
  constexpr uint32_t kChunk = 4096;
  *a = ModelBytes(DataKind::kBf16Weights, 4 * kChunk, 11);
  std::vector<uint8_t> own = ModelBytes(DataKind::kFp32Weights, kChunk, 12);
  auto piece = [&](const std::vector<uint8_t>& v, size_t i) {
    return std::vector<uint8_t>(v.begin() + i * kChunk, v.begin() + (i + 1) * kChunk);
  };
  b->clear();
  for (const auto& p : {piece(*a, 2), piece(*a, 0), own, piece(*a, 1)}) b->insert(b->end(), p.begin(), p.end());
  *c = own;
  c->insert(c->end(), own.begin(), own.end());

  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagDedup;
  header.producer = "cli_test";
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  auto check = [](const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); };
  auto add = [&](uint32_t id, uint64_t offset, std::span<const uint8_t> raw) {
    EncodedChunk chunk;
    check(encoder.Encode(raw, &chunk));
    check(writer.AddChunk(id, offset, raw.size(), chunk));
  };
  auto ref = [&](uint32_t id, uint64_t offset, uint32_t source, uint64_t source_offset, std::span<const uint8_t> raw) {
    DedupRef r{source, source_offset, HashContent128(raw.data(), raw.size())};
    check(writer.AddDedupRef(id, offset, raw.size(), Hash64(raw.data(), raw.size()), r));
  };
  check(writer.Start());
  uint32_t ida = writer.BeginObject(ObjectMetadata{"a", {}}, a->size()).value();
  uint32_t idb = writer.BeginObject(ObjectMetadata{"sub/b", {}}, b->size()).value();
  for (size_t i = 0; i < 4; ++i) add(ida, i * kChunk, std::span<const uint8_t>(*a).subspan(i * kChunk, kChunk));
  ref(idb, 0, ida, 2 * kChunk, std::span<const uint8_t>(*a).subspan(2 * kChunk, kChunk));
  check(writer.EndObject(ida));
  ref(idb, kChunk, ida, 0, std::span<const uint8_t>(*a).subspan(0, kChunk));
  add(idb, 2 * kChunk, own);
  ref(idb, 3 * kChunk, ida, kChunk, std::span<const uint8_t>(*a).subspan(kChunk, kChunk));
  check(writer.EndObject(idb));
  uint32_t idc = writer.BeginObject(ObjectMetadata{"c", {}}, c->size()).value();
  add(idc, 0, own);
  ref(idc, kChunk, idc, 0, own);
  check(writer.EndObject(idc));
  check(writer.Finish());
  return sink.bytes();
}

TEST(CliDedupTest, UnpackCopiesReferencedBytes) {
  TempDir dir;
  std::vector<uint8_t> a, b, c;
  std::vector<uint8_t> stream = MakeDedupStream(&a, &b, &c);
  ASSERT_FALSE(stream.empty());
  WriteFileBytes(dir.File("dedup.vfs"), stream);
  EXPECT_CODE(Vf("verify dedup.vfs", dir.path()), 0);

  CommandResult r = Vf("unpack dedup.vfs -o out", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_EQ(ReadFileBytes(dir.File("out/a")), a);
  EXPECT_EQ(ReadFileBytes(dir.File("out/sub/b")), b);
  EXPECT_EQ(ReadFileBytes(dir.File("out/c")), c);

  // inspect names the references instead of calling them raw chunks.
  r = Vf("inspect dedup.vfs", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "dedup-ref")) << r.output;
  r = Sh("cd " + Q(dir.path()) + " && $VF inspect --json dedup.vfs 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["objects"][1]["dedup_refs"], 3);
  EXPECT_EQ(j["objects"][1]["data_chunks"], 1);
  EXPECT_EQ(j["objects"][2]["dedup_refs"], 1);
  EXPECT_EQ(j["codecs"]["dedup-ref"]["chunks"], 4);
  EXPECT_EQ(j["dedup_window"], 0) << "written without a window, as earlier writers did";
  r = Vf("inspect dedup.vfs", dir.path());
  EXPECT_TRUE(Contains(r.output, "dedup without a window (an earlier writer)")) << r.output;

  // A one-object dedup stream to a file, and to stdout (refused: the bytes
  // it names have gone down the pipe already).
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = 4096;
  header.flags = kStreamFlagDedup;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  ASSERT_TRUE(writer.Start().ok());
  uint32_t id = writer.BeginObject(ObjectMetadata{"c", {}}, c.size()).value();
  EncodedChunk chunk;
  ASSERT_TRUE(encoder.Encode(std::span<const uint8_t>(c).first(4096), &chunk).ok());
  ASSERT_TRUE(writer.AddChunk(id, 0, 4096, chunk).ok());
  DedupRef ref{id, 0, HashContent128(c.data(), 4096)};
  ASSERT_TRUE(writer.AddDedupRef(id, 4096, 4096, Hash64(c.data(), 4096), ref).ok());
  ASSERT_TRUE(writer.EndObject(id).ok());
  ASSERT_TRUE(writer.Finish().ok());
  WriteFileBytes(dir.File("one.vfs"), sink.bytes());
  EXPECT_CODE(Vf("unpack one.vfs -o one.bin", dir.path()), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("one.bin")), c);
  r = Sh("cd " + Q(dir.path()) + " && $VF unpack one.vfs -o - > stdout.bin");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "dedup")) << r.output;
}

// ---------------------------------------------------------------- legacy images

TEST(CliLegacyTest, AmdgpuPagesImageRoundTripsWithItsHeader) {
  TempDir dir;
  std::vector<uint8_t> content = ModelBytes(DataKind::kBf16Weights, 70000, 9);
  std::vector<uint8_t> image(8 + content.size());
  StoreLE64(image.data(), content.size());
  std::copy(content.begin(), content.end(), image.begin() + 8);
  WriteFileBytes(dir.File("amdgpu-pages-1-0001.img"), image);

  CommandResult r = Vf("pack amdgpu-pages-1-0001.img -o legacy.vfs --chunk-size 16K", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "legacy")) << r.output;
  EXPECT_CODE(Vf("verify legacy.vfs", dir.path()), 0);
  CommandResult j = Vf("inspect --json legacy.vfs", dir.path());
  ASSERT_EQ(j.code, 0) << j.output;
  nlohmann::json doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["objects"][0]["size"], content.size());  // the header is not content
  EXPECT_EQ(doc["objects"][0]["attributes"]["legacy-format"], "amdgpu-pages");

  EXPECT_CODE(Vf("unpack legacy.vfs -o out/", dir.path()), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("out/amdgpu-pages-1-0001.img")), image);
  EXPECT_CODE(Vf("unpack legacy.vfs -o restored.img", dir.path()), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("restored.img")), image);
  EXPECT_CODE(Sh("cd " + Q(dir.path()) + " && $VF unpack legacy.vfs -o - > stdout.img"), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("stdout.img")), image);

  // A file with the legacy name whose header does not match is packed as it is.
  std::vector<uint8_t> odd = image;
  odd[0] ^= 1;
  fs::create_directory(dir.File("odd"));
  WriteFileBytes(dir.File("odd/amdgpu-pages-2-0001.img"), odd);
  r = Vf("pack odd/amdgpu-pages-2-0001.img -o odd.vfs", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_FALSE(Contains(r.output, "legacy")) << r.output;
  EXPECT_CODE(Vf("unpack odd.vfs -o odd.out", dir.path()), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("odd.out")), odd);
}

// ---------------------------------------------------------------- bench

TEST(CliBenchTest, CodecsBenchWritesTableAndJson) {
  TempDir dir;
  CommandResult r =
      Vf("bench codecs --size 1M --min-seconds 0.01 --no-peers --kinds bf16,zeros --json bench.json", dir.path());
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "ratio")) << r.output;
  EXPECT_TRUE(Contains(r.output, "bf16")) << r.output;
  EXPECT_TRUE(Contains(r.output, "zeros")) << r.output;
  std::vector<uint8_t> bytes = ReadFileBytes(dir.File("bench.json"));
  nlohmann::json j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  const nlohmann::json& rows = j.is_array() ? j : j["rows"];
  ASSERT_TRUE(rows.is_array()) << j.dump();
  EXPECT_GE(rows.size(), 2u);
  bool saw_bf16 = false, saw_zeros = false;
  for (const nlohmann::json& row : rows) {
    EXPECT_TRUE(row.contains("codec")) << row.dump();
    EXPECT_TRUE(row.contains("ratio")) << row.dump();
    saw_bf16 |= row.value("data", "") == "bf16";
    saw_zeros |= row.value("data", "") == "zeros";
  }
  EXPECT_TRUE(saw_bf16);
  EXPECT_TRUE(saw_zeros);
}

// With 8 threads or more, pack writes a file's payloads on threads of the
// file sink's own (issue 54: off the ordered write stage): the same stream
// as with one thread, and it verifies.
TEST(CliBenchTest, PackWithManyThreadsWritesTheSameStream) {
  TempDir dir;
  ASSERT_EQ(Vf("gen -k bf16 -s 6M -o in.bin", dir.path()).code, 0);
  for (const char* threads : {"1", "8"})
    EXPECT_CODE(
        Vf(std::string("pack -q --chunk-size 64K -j ") + threads + " in.bin -o j" + threads + ".vfs", dir.path()), 0);
  EXPECT_EQ(ReadFileBytes(dir.File("j8.vfs")), ReadFileBytes(dir.File("j1.vfs")));
  EXPECT_CODE(Vf("verify -q j8.vfs", dir.path()), 0);
}

// The pipeline bench's CPU figures (issue 54): per GiB for dump and restore,
// the simulated rings' share apart, each serial stage's, and the bounds on
// many cores. Only that they are there and plausible: no timing is asserted.
TEST(CliBenchTest, PipelineBenchReportsCpuPerGibAndSerialStages) {
  TempDir dir;
  CommandResult r =
      Vf("bench pipeline --gpus 1 --size-per-gpu 8M --repeat 1 --threads 2 --work-dir " + dir.path() + " --json p.json",
         dir.path());
  EXPECT_CODE(r, 0);
  for (const char* heading : {"CPU seconds per GiB", "serial stages", "128 cores"})
    EXPECT_TRUE(Contains(r.output, heading)) << heading << "\n" << r.output;
  std::vector<uint8_t> bytes = ReadFileBytes(dir.File("p.json"));
  nlohmann::json j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  ASSERT_EQ(j["runs"].size(), 2u) << j.dump();
  const std::map<std::string, std::vector<std::string>> stages = {{"dump_cpu", {"generate", "dedup", "write"}},
                                                                  {"restore_cpu", {"read", "account"}}};
  for (const nlohmann::json& run : j["runs"]) {
    for (const auto& [graph, names] : stages) {
      const nlohmann::json& g = run[graph];
      SCOPED_TRACE(graph + " " + g.dump());
      const double total = g["cpu_s_per_gib"], dma = g["dma_cpu_s_per_gib"];
      EXPECT_GT(total, 0);
      EXPECT_GE(dma, 0);
      EXPECT_LE(dma, total);
      EXPECT_NEAR(g["cpu_s_per_gib_without_dma"].get<double>(), total - dma, 1e-9);
      EXPECT_NEAR(g["gib_per_s_per_core"].get<double>() * (total - dma), 1.0, 1e-9);
      double serial = 0;
      ASSERT_EQ(g["serial_stages"].size(), names.size());
      for (size_t i = 0; i < names.size(); ++i) {
        const nlohmann::json& stage = g["serial_stages"][i];
        EXPECT_EQ(stage["stage"], names[i]);
        EXPECT_GE(stage["cpu_s_per_gib"].get<double>(), 0);
        EXPECT_GE(stage["bound_gbps"].get<double>(), 0);
        serial += stage["cpu_s_per_gib"].get<double>();
      }
      EXPECT_LE(serial, total - dma + 1e-6) << "the serial stages are part of the process's CPU";
      EXPECT_GE(g["parallel_cpu_s_per_gib"].get<double>(), 0);
      double last = 0;
      for (const char* cores : {"16", "64", "128"}) {
        const double gbps = g["bounds_on_cores"][cores]["gbps"];
        EXPECT_GE(gbps, last) << "more cores never lower the bound";
        last = gbps;
      }
    }
  }
}

}  // namespace
}  // namespace vramflow
