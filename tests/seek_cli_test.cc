// SPDX-License-Identifier: MIT
// The command line on stored streams with a seek index (files here; s3://
// in s3_seek_cli_test.cc): inspect reads only the index, unpack --object and
// --gpu fetch only the selected objects' frames and restore exactly what a
// full unpack restores; streams without an index are read whole, saying so.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;  // short: it quotes every word below

// `line` in `dir`, with $VF the binary; stdout and stderr together unless redirected.
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

// "(..., N of M bytes)" from unpack's report: what was read of the stream.
bool BytesRead(const std::string& output, uint64_t* read, uint64_t* total) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(, (\d+) of (\d+) bytes\))"))) return false;
  *read = std::stoull(m[1]);
  *total = std::stoull(m[2]);
  return true;
}

// Every regular file under `dir`, relative, sorted.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

class SeekCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CODE(Sh(dir_.path(), "$VF gen -k bf16 -s 12M -o weights.bin"), 0);
    ASSERT_CODE(Sh(dir_.path(), "$VF gen -k adam-v -s 5M --seed 3 -o optimizer.bin"), 0);
    ASSERT_CODE(Sh(dir_.path(), "$VF gen -k fp32 -s 3M --seed 4 -o master.bin"), 0);
    ASSERT_CODE(Sh(dir_.path(), "$VF pack -q weights.bin optimizer.bin master.bin -o ckpt.vfs"), 0);
  }
  std::string File(const std::string& name) const { return dir_.File(name); }

  TempDir dir_;
};

//! inspect of a file with a seek index reads only its ends: a small fraction
//! of the stream, and lists every object with its size; --full reads every
//! frame (codec mix), and the figures agree.
TEST_F(SeekCliTest, InspectReadsOnlyTheIndex) {
  CommandResult j = Sh(dir_.path(), "$VF inspect --json ckpt.vfs 2>/dev/null");
  ASSERT_CODE(j, 0);
  nlohmann::json index = nlohmann::json::parse(j.output);
  const uint64_t stream_bytes = fs::file_size(File("ckpt.vfs"));
  EXPECT_EQ(index["source"], "seek index");
  EXPECT_EQ(index["stream_bytes"], stream_bytes);
  EXPECT_LE(index["bytes_read"].get<uint64_t>(), 300u << 10);
  EXPECT_LT(index["bytes_read"].get<uint64_t>() * 20, stream_bytes) << "more than 5% of the stream read";
  ASSERT_EQ(index["objects"].size(), 3u);
  EXPECT_EQ(index["objects"][0]["name"], "weights.bin");
  EXPECT_EQ(index["objects"][0]["size"], 12u << 20);
  EXPECT_EQ(index["objects"][1]["name"], "optimizer.bin");
  EXPECT_EQ(index["objects"][2]["size"], 3u << 20);

  CommandResult f = Sh(dir_.path(), "$VF inspect --json --full ckpt.vfs 2>/dev/null");
  ASSERT_CODE(f, 0);
  nlohmann::json full = nlohmann::json::parse(f.output);
  EXPECT_EQ(full["source"], "frames");
  EXPECT_EQ(full["bytes_read"], stream_bytes);
  EXPECT_FALSE(full["codecs"].empty());
  for (size_t i = 0; i < 3; ++i)
    for (const char* key : {"name", "size", "data_chunks", "zero_runs", "stored_bytes", "attributes"})
      EXPECT_EQ(index["objects"][i][key], full["objects"][i][key]) << i << " " << key;

  CommandResult text = Sh(dir_.path(), "$VF inspect ckpt.vfs");
  EXPECT_CODE(text, 0);
  for (const char* m : {"objects:  3", "status:   complete", "read:     ", "weights.bin", "master.bin", "--full"})
    EXPECT_TRUE(Contains(text.output, m)) << m << "\n" << text.output;
  EXPECT_FALSE(Contains(text.output, "codec mix:")) << text.output;
}

//! A stream written to a pipe has no index: inspect says so and reads it whole.
TEST_F(SeekCliTest, InspectWithoutAnIndexReadsEverything) {
  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q weights.bin optimizer.bin -o - | cat > piped.vfs"), 0);
  CommandResult r = Sh(dir_.path(), "$VF inspect piped.vfs");
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "has no seek index")) << r.output;
  EXPECT_TRUE(Contains(r.output, "read:     every frame: 'piped.vfs' has no seek index")) << r.output;
  EXPECT_TRUE(Contains(r.output, "codec mix")) << r.output;
  CommandResult j = Sh(dir_.path(), "$VF inspect --json piped.vfs 2>/dev/null");
  ASSERT_CODE(j, 0);
  nlohmann::json doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["source"], "frames");
  EXPECT_TRUE(Contains(doc["note"].get<std::string>(), "has no seek index")) << j.output;
}

//! unpack --object restores exactly what a full unpack restores of those
//! objects, nothing else, and reads only their frames (and the index).
TEST_F(SeekCliTest, UnpackObjectEqualsFullUnpackAndReadsOnlyItsFrames) {
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q ckpt.vfs -o all/"), 0);
  CommandResult j = Sh(dir_.path(), "$VF inspect --json ckpt.vfs 2>/dev/null");
  ASSERT_CODE(j, 0);
  nlohmann::json index = nlohmann::json::parse(j.output);

  CommandResult u = Sh(dir_.path(), "$VF unpack ckpt.vfs --object optimizer.bin -o one/");
  ASSERT_CODE(u, 0);
  EXPECT_TRUE(Contains(u.output, "unpacked 1 object(s), 5.00 MiB, verified")) << u.output;
  EXPECT_EQ(Files(File("one")), std::vector<std::string>{"optimizer.bin"});
  EXPECT_EQ(ReadFileBytes(File("one/optimizer.bin")), ReadFileBytes(File("all/optimizer.bin")));
  EXPECT_EQ(ReadFileBytes(File("one/optimizer.bin")), ReadFileBytes(File("optimizer.bin")));
  uint64_t read = 0, total = 0;
  ASSERT_TRUE(BytesRead(u.output, &read, &total)) << u.output;
  EXPECT_EQ(total, fs::file_size(File("ckpt.vfs")));
  EXPECT_EQ(read, index["bytes_read"].get<uint64_t>() + index["objects"][1]["frame_bytes"].get<uint64_t>())
      << "read more than the index and the object's frames";

  // Two objects by name, into a new directory; one object to a file and to stdout.
  u = Sh(dir_.path(), "$VF unpack -q ckpt.vfs --object master.bin --object weights.bin -o two");
  ASSERT_CODE(u, 0);
  EXPECT_EQ(Files(File("two")), (std::vector<std::string>{"master.bin", "weights.bin"}));
  EXPECT_EQ(ReadFileBytes(File("two/master.bin")), ReadFileBytes(File("master.bin")));
  EXPECT_EQ(ReadFileBytes(File("two/weights.bin")), ReadFileBytes(File("weights.bin")));
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q ckpt.vfs --object master.bin -o m.bin"), 0);
  EXPECT_EQ(ReadFileBytes(File("m.bin")), ReadFileBytes(File("master.bin")));
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q ckpt.vfs --object master.bin -o - > stdout.bin"), 0);
  EXPECT_EQ(ReadFileBytes(File("stdout.bin")), ReadFileBytes(File("master.bin")));

  // A name or GPU the stream does not hold: a clear error, nothing written.
  CommandResult bad = Sh(dir_.path(), "$VF unpack ckpt.vfs --object nope.bin -o never/");
  EXPECT_CODE(bad, 1);
  EXPECT_TRUE(Contains(bad.output, "has no object named 'nope.bin' (it holds 'weights.bin', 'optimizer.bin'"))
      << bad.output;
  bad = Sh(dir_.path(), "$VF unpack ckpt.vfs --gpu 1 -o never/");
  EXPECT_CODE(bad, 1);
  EXPECT_TRUE(Contains(bad.output, "has no object on GPU 1")) << bad.output;
  EXPECT_FALSE(fs::exists(File("never")));
}

//! Without an index (a stream from stdin) unpack --object reads it all,
//! says so, and still restores only the selected object, byte for byte.
TEST_F(SeekCliTest, UnpackObjectWithoutAnIndexReadsEverything) {
  CommandResult u = Sh(dir_.path(), "cat ckpt.vfs | $VF unpack - --object optimizer.bin -o piped/");
  ASSERT_CODE(u, 0);
  EXPECT_TRUE(Contains(u.output, "cannot be read at offsets")) << u.output;
  EXPECT_TRUE(Contains(u.output, "reading the whole stream")) << u.output;
  EXPECT_TRUE(Contains(u.output, "unpacked 1 object(s), 5.00 MiB, verified")) << u.output;
  EXPECT_EQ(Files(File("piped")), std::vector<std::string>{"optimizer.bin"});
  EXPECT_EQ(ReadFileBytes(File("piped/optimizer.bin")), ReadFileBytes(File("optimizer.bin")));
  CommandResult bad = Sh(dir_.path(), "cat ckpt.vfs | $VF unpack - --object nope -o never/");
  EXPECT_CODE(bad, 1);
  EXPECT_TRUE(Contains(bad.output, "has no object named 'nope'")) << bad.output;
  EXPECT_FALSE(fs::exists(File("never")));
  for (const std::string& e : Files(dir_.path())) EXPECT_FALSE(Contains(e, ".vf-unpack-")) << e;
}

//! One GPU of a two-GPU checkpoint of the simulator: its files are those of
//! a full unpack; without dedup only its own frames and the index are read,
//! with dedup also the DATA frames its references name on the other GPU.
TEST_F(SeekCliTest, UnpackOneGpuOfATwoGpuCheckpoint) {
  for (const char* dedup : {"--no-dedup", ""}) {
    SCOPED_TRACE(dedup);
    fs::remove_all(File("all"));
    fs::remove_all(File("g1"));
    ASSERT_CODE(Sh(dir_.path(), std::string("$VF demo -q -f -g 2 -s 8M -j 2 --to gpus.vfs ") + dedup + " > /dev/null"),
                0);
    ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q gpus.vfs -o all/"), 0);
    CommandResult u = Sh(dir_.path(), "$VF unpack gpus.vfs --gpu 1 -o g1/");
    ASSERT_CODE(u, 0);
    std::vector<std::string> files = Files(File("g1"));
    ASSERT_EQ(files.size(), 7u) << u.output;
    for (const std::string& f : files) {
      EXPECT_EQ(f.rfind("gpu1/", 0), 0u) << f;
      EXPECT_TRUE(ReadFileBytes(File("g1/" + f)) == ReadFileBytes(File("all/" + f))) << f;
    }
    CommandResult j = Sh(dir_.path(), "$VF inspect --json gpus.vfs 2>/dev/null");
    ASSERT_CODE(j, 0);
    nlohmann::json index = nlohmann::json::parse(j.output);
    uint64_t own = 0, other = 0;
    for (const auto& o : index["objects"])
      (o["attributes"]["gpu"] == "1" ? own : other) += o["frame_bytes"].get<uint64_t>();
    uint64_t read = 0, total = 0;
    ASSERT_TRUE(BytesRead(u.output, &read, &total)) << u.output;
    const uint64_t index_bytes = index["bytes_read"];
    if (std::string(dedup) == "--no-dedup") {
      EXPECT_EQ(read, index_bytes + own);
    } else {
      EXPECT_GT(read, index_bytes + own / 2);
      EXPECT_LT(read, index_bytes + own + other / 2);
    }
  }
}

}  // namespace
}  // namespace vramflow
