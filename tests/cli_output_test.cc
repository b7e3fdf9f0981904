// SPDX-License-Identifier: MIT
// The command line's consistency and machine output, run against the built
// binary: --force everywhere a file is replaced, destinations checked before
// the work, one error prefix, the exit statuses of tools/cli/exit_codes.h,
// --progress=lines for logs and the --json reports (docs/CLI.md).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;
constexpr auto& Q = testing::ShellQuote;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CliOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Vf("gen -s 3M -k bf16 -o in.bin").code, 0);
    ASSERT_EQ(Vf("pack -q in.bin -o s.vfs").code, 0);
  }
  // `vramflow ARGS` in the work directory; stdout and stderr together.
  CommandResult Vf(const std::string& args) const { return Sh("$VF " + args); }
  // A shell line in the work directory with $VF the binary.
  CommandResult Sh(const std::string& line) const {
    CommandResult r;
    r.code = RunCommand("( cd " + Q(dir_.path()) + " && VF=" + Q(VramflowBinary()) + " && " + line + " )", &r.output);
    return r;
  }
  // stdout alone of `vramflow ARGS`, parsed as JSON (null if it is not).
  nlohmann::json Json(const std::string& args, int* code) const {
    CommandResult r = Sh("$VF " + args + " 2>/dev/null");
    *code = r.code;
    nlohmann::json j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << args << ": stdout is not one JSON object:\n" << r.output;
    return j;
  }
  TempDir dir_;
};

// gen and demo --to replaced an existing file silently; now every command
// that writes refuses without --force, and leaves the file as it was.
TEST_F(CliOutput, EveryWriterRefusesToReplaceWithoutForce) {
  ASSERT_EQ(Vf("gen -s 1K -o keep.bin").code, 0);
  const auto before = fs::file_size(dir_.File("keep.bin"));
  for (const std::string args : {"gen -s 2K -o keep.bin", "demo -g 1 -s 4M -q --to keep.bin", "pack in.bin -o keep.bin",
                                 "send s.vfs keep.bin"}) {
    CommandResult r = Vf(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "exists (use --force to overwrite)")) << args << "\n" << r.output;
    EXPECT_EQ(fs::file_size(dir_.File("keep.bin")), before) << args << " changed the file";
  }
  EXPECT_EQ(Vf("gen -s 2K -o keep.bin --force").code, 0);
  EXPECT_EQ(fs::file_size(dir_.File("keep.bin")), 2048u);
  CommandResult demo = Vf("demo -g 1 -s 4M -q --to keep.bin -f");
  EXPECT_EQ(demo.code, 0) << demo.output;
  EXPECT_EQ(Vf("verify -q keep.bin").code, 0);
}

// A directory where the stream file goes was found only at the final rename,
// after all the work; now before it, with or without --force, and nothing
// (no temporary file) is left beside it.
TEST_F(CliOutput, DirectoryDestinationIsRefusedBeforeTheWork) {
  ASSERT_EQ(::mkdir(dir_.File("restored").c_str(), 0755), 0);
  for (const std::string args : {"pack in.bin -o restored --force", "send s.vfs restored -f",
                                 "gen -s 1M -o restored -f", "demo -g 1 -s 64M -q --to restored -f"}) {
    CommandResult r = Vf(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "'restored' is a directory")) << args << "\n" << r.output;
    EXPECT_FALSE(Contains(r.output, "building a simulated process")) << "demo did the work first:\n" << r.output;
  }
  for (const auto& entry : fs::directory_iterator(dir_.path()))
    EXPECT_FALSE(Contains(entry.path().filename().string(), ".vf-tmp-")) << entry.path();
}

// Parse errors of CLI11 carry the same prefix as every other error.
TEST_F(CliOutput, ParseErrorsCarryTheCommandPrefix) {
  CommandResult r = Vf("verify s.vfs --no-such-flag");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "vramflow verify: error: ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--no-such-flag")) << r.output;
  r = Vf("bench codecs --kinds");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "vramflow bench codecs: error: ")) << r.output;
  r = Vf("pack in.bin -o x.vfs --progress sometimes");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "vramflow pack: error: ")) << r.output;
  r = Vf("no-such-command");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "vramflow: error: ")) << r.output;
}

// Each exit status of tools/cli/exit_codes.h, from the command that gives it.
TEST_F(CliOutput, ExitStatusesTellFailuresApart) {
  // 1: a missing input, and a missing key file alike (the key was 2).
  CommandResult missing = Vf("verify nothing.vfs");
  EXPECT_EQ(missing.code, 1) << missing.output;
  CommandResult key = Vf("send s.vfs tcp://127.0.0.1:9 --key-file no-such.key");
  EXPECT_EQ(key.code, 1) << key.output;
  EXPECT_TRUE(Contains(key.output, "no-such.key")) << key.output;
  // 2: the command line.
  EXPECT_EQ(Vf("unpack s.vfs").code, 2);
  // 3: a stream cut short, a flipped byte, bytes that are no stream.
  ASSERT_EQ(Sh("head -c 100000 s.vfs > cut.vfs").code, 0);
  CommandResult cut = Vf("verify cut.vfs");
  EXPECT_EQ(cut.code, 3) << cut.output;
  ASSERT_EQ(
      Sh("cp s.vfs flipped.vfs && printf '\\377' | dd of=flipped.vfs bs=1 seek=5000 conv=notrunc 2>/dev/null").code, 0);
  CommandResult flipped = Vf("unpack flipped.vfs -o out/");
  EXPECT_EQ(flipped.code, 3) << flipped.output;
  EXPECT_FALSE(fs::exists(dir_.File("out")));
  // 4: a receiver with another key refuses the sender's TLS handshake.
  ASSERT_EQ(Vf("keygen -o ka").code, 0);
  ASSERT_EQ(Vf("keygen -o kb").code, 0);
  CommandResult auth =
      Sh("($VF recv --listen tcp://127.0.0.1:0 -o got.vfs --key-file ka --accept-timeout 20 2>recv.log & echo $! > "
         "recv.pid); "
         "for i in $(seq 200); do grep -q 'listening on' recv.log && break; sleep 0.05; done; "
         "port=$(sed -n 's|.*listening on tcp://127.0.0.1:\\([0-9]*\\).*|\\1|p' recv.log); "
         "$VF send -q s.vfs tcp://127.0.0.1:$port --key-file kb --retries 0; rc=$?; "
         "kill $(cat recv.pid); exit $rc");
  EXPECT_EQ(auth.code, 4) << auth.output;
  EXPECT_TRUE(Contains(auth.output, "vramflow send: error: authentication failed")) << auth.output;
  EXPECT_FALSE(fs::exists(dir_.File("got.vfs")));
}

// inspect of bytes that are no stream printed a report of zeros; now it
// says what they are, and fails as corrupt data does.
TEST_F(CliOutput, InspectOfANonStreamSaysSo) {
  CommandResult r = Vf("inspect in.bin");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(Contains(r.output, "vramflow inspect: error: corruption: 'in.bin' is not a vramflow chunk stream"))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "objects:")) << "a report was printed:\n" << r.output;
  ASSERT_EQ(Sh(": > empty.vfs").code, 0);
  CommandResult empty = Vf("inspect --json empty.vfs");
  EXPECT_NE(empty.code, 0) << empty.output;
  EXPECT_FALSE(Contains(empty.output, "\"objects\"")) << empty.output;
}

// --progress=lines: a line per interval with bytes, rate and (the total
// known) percentage and ETA, for logs; none and -q print no progress.
TEST_F(CliOutput, ProgressLinesForLogs) {
  ASSERT_EQ(Vf("gen -s 96M -k fp32 -o big.bin").code, 0);
  CommandResult lines = Vf("pack big.bin -o big.vfs -j 1 -c zstd:3 --progress lines --progress-interval 0.1");
  ASSERT_EQ(lines.code, 0) << lines.output;
  EXPECT_TRUE(Contains(lines.output, "pack: ")) << lines.output;
  EXPECT_TRUE(Contains(lines.output, " of 96.00 MiB (")) << lines.output;
  EXPECT_TRUE(Contains(lines.output, "MB/s, ETA ")) << lines.output;
  EXPECT_FALSE(Contains(lines.output, "\r")) << "lines mode redraws in place";
  CommandResult none = Vf("pack big.bin -o big2.vfs -j 1 -c zstd:3 --progress none");
  ASSERT_EQ(none.code, 0) << none.output;
  EXPECT_FALSE(Contains(none.output, "pack: ")) << none.output;
  EXPECT_TRUE(Contains(none.output, "packed 1 object(s)")) << "--progress none keeps the summary:\n" << none.output;
  CommandResult quiet = Vf("pack big.bin -o big3.vfs -j 1 -q --progress lines --progress-interval 0.1");
  ASSERT_EQ(quiet.code, 0) << quiet.output;
  EXPECT_EQ(quiet.output, "");
  // Without a known total (a stream being received): bytes and rate only.
  CommandResult unpack = Vf("unpack big.vfs -o u/ --progress lines --progress-interval 0.1 -j 1");
  ASSERT_EQ(unpack.code, 0) << unpack.output;
  EXPECT_TRUE(Contains(unpack.output, "unpack: ")) << unpack.output;
  EXPECT_TRUE(Contains(unpack.output, " MB/s\n")) << unpack.output;
  EXPECT_FALSE(Contains(unpack.output, "ETA")) << unpack.output;
}

// --json: one object on stdout with schema_version and the same names for
// the same quantities; a failure is an object too, with its exit code.
TEST_F(CliOutput, JsonReportsShareTheirFieldNames) {
  int code = -1;
  nlohmann::json pack = Json("pack in.bin -o j.vfs --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json verify = Json("verify j.vfs --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json unpack = Json("unpack j.vfs -o out/ --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json send = Json("send j.vfs copy.vfs --json", &code);
  ASSERT_EQ(code, 0);
  for (const nlohmann::json* j : {&pack, &verify, &unpack, &send}) {
    EXPECT_EQ((*j)["schema_version"], 1) << j->dump();
    EXPECT_EQ((*j)["ok"], true) << j->dump();
    EXPECT_TRUE((*j)["seconds"].is_number()) << j->dump();
  }
  EXPECT_EQ(pack["command"], "pack");
  EXPECT_EQ(pack["objects"], 1);
  EXPECT_EQ(pack["raw_bytes"], 3u << 20);
  EXPECT_EQ(pack["stream_bytes"], fs::file_size(dir_.File("j.vfs")));
  EXPECT_EQ(verify["objects"], pack["objects"]);
  EXPECT_EQ(verify["raw_bytes"], pack["raw_bytes"]);
  EXPECT_EQ(verify["stream_bytes"], pack["stream_bytes"]);
  EXPECT_EQ(unpack["objects"], pack["objects"]);
  EXPECT_EQ(unpack["raw_bytes"], pack["raw_bytes"]);
  EXPECT_EQ(unpack["written"].size(), 1u);
  EXPECT_EQ(send["stream_bytes"], pack["stream_bytes"]);
  EXPECT_EQ(send["command"], "send");

  nlohmann::json failed = Json("verify in.bin --json", &code);
  EXPECT_EQ(code, 3);
  EXPECT_EQ(failed["ok"], false) << failed.dump();
  EXPECT_EQ(failed["exit_code"], 3) << failed.dump();
  EXPECT_EQ(failed["error"]["code"], "corruption") << failed.dump();
  EXPECT_TRUE(Contains(failed["error"]["message"].get<std::string>(), "bad magic")) << failed.dump();
  // inspect and demo: the same leading fields and failure object.
  nlohmann::json inspect = Json("inspect j.vfs --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json full = Json("inspect --full j.vfs --json", &code);
  ASSERT_EQ(code, 0);
  nlohmann::json demo = Json("demo -g 1 -s 1M --json", &code);
  ASSERT_EQ(code, 0);
  for (const nlohmann::json* j : {&inspect, &full, &demo}) {
    EXPECT_EQ((*j)["schema_version"], 1) << j->dump();
    EXPECT_EQ((*j)["ok"], true) << j->dump();
  }
  EXPECT_EQ(inspect["command"], "inspect");
  EXPECT_EQ(full["command"], "inspect");
  EXPECT_EQ(inspect["raw_bytes"], pack["raw_bytes"]);
  EXPECT_EQ(full["raw_bytes"], pack["raw_bytes"]);
  EXPECT_EQ(demo["command"], "demo");
  for (const std::string args :
       {"inspect in.bin --json", "inspect missing.vfs --json", "demo -g 1 -s 1M --to nodir/x.vfs --json",
        "inspect tcp://127.0.0.1:1 --json",
        // a path that is not UTF-8, quoted in the message
        "inspect \"$(printf 'x\\377.vfs')\" --json", "verify \"$(printf 'x\\377.vfs')\" --json"}) {
    nlohmann::json f = Json(args, &code);
    EXPECT_NE(code, 0) << args;
    EXPECT_EQ(f["schema_version"], 1) << args << ": " << f.dump();
    EXPECT_EQ(f["ok"], false) << args << ": " << f.dump();
    EXPECT_EQ(f["exit_code"], code) << args << ": " << f.dump();
    EXPECT_TRUE(f["error"]["code"].is_string()) << args << ": " << f.dump();
    EXPECT_TRUE(f["error"]["message"].is_string()) << args << ": " << f.dump();
  }
  EXPECT_EQ(Json("inspect in.bin --json", &code)["error"]["code"], "corruption");
  // A stream cut short: the report of what was read carries the failure.
  ASSERT_EQ(Sh("head -c 2000 j.vfs > cut.vfs").code, 0);
  nlohmann::json cut = Json("inspect cut.vfs --json", &code);
  EXPECT_EQ(code, 3);
  EXPECT_EQ(cut["ok"], false) << cut.dump();
  EXPECT_EQ(cut["exit_code"], 3) << cut.dump();
  EXPECT_EQ(cut["error"]["code"], "truncated") << cut.dump();
  EXPECT_EQ(cut["complete"], false) << cut.dump();
  EXPECT_EQ(cut["objects"].size(), 1u) << cut.dump();
  // stdout cannot carry both the data and the report.
  CommandResult both = Vf("pack in.bin -o - --json");
  EXPECT_EQ(both.code, 2) << both.output.substr(0, 500);
}

// recv --json: the stream it stored, from a sender over a UNIX socket.
TEST_F(CliOutput, RecvJsonReportsTheStoredStream) {
  CommandResult r = Sh(
      "($VF recv --listen unix:sock -o got.vfs --json --accept-timeout 20 >recv.json 2>recv.log & echo $! > recv.pid); "
      "for i in $(seq 200); do [ -S sock ] && break; sleep 0.05; done; "
      "$VF send -q s.vfs unix:sock && while kill -0 $(cat recv.pid) 2>/dev/null; do sleep 0.05; done; cat recv.json");
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["command"], "recv");
  EXPECT_EQ(j["stream_bytes"], fs::file_size(dir_.File("s.vfs")));
  EXPECT_EQ(j["output"], "got.vfs");
}

}  // namespace
}  // namespace vramflow
