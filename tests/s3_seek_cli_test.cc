// SPDX-License-Identifier: MIT
// Reading parts of an S3 object through its seek index, against a real Ceph
// RGW (S3Rgw.*, see s3_rgw_fixture.h): a two-GPU checkpoint of the
// simulator goes to s3://; inspect reads only its ends, and restoring one
// GPU fetches that GPU's frames and the index, nothing else, and gives the
// files a full unpack gives. The built CLI runs through a shell; the bytes
// fetched are what it reports (every ranged GET body, counted).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/s3_rgw_fixture.h"
#include "tests/support/shell.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;  // short: it quotes every word below

// `vramflow ARGS` (shell words).
CommandResult Vf(const std::string& args) { return testing::RunShell(Q(VRAMFLOW_BINARY) + " " + args); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

// A JSON number field `"key": N` of the text after `from` in `json` (the
// S3 test binary does without a JSON library).
uint64_t Number(const std::string& json, const std::string& key, size_t from = 0) {
  std::smatch m;
  std::string rest = json.substr(from);
  if (!std::regex_search(rest, m, std::regex("\"" + key + "\": (\\d+)"))) return 0;
  return std::stoull(m[1]);
}

#define ASSERT_CODE(result, expected) ASSERT_EQ((result).code, (expected)) << (result).output

class TempDirectory {
 public:
  TempDirectory() {
    char tmpl[] = "/tmp/vf-s3seek-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDirectory() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

//! Restore one GPU of a two-GPU checkpoint on S3: the bytes fetched are the
//! seek index's read plus that GPU's frames, exactly (no dedup, so no
//! reference reaches the other GPU), and the files equal a full unpack's.
TEST_F(S3Rgw, RestoreOneGpuFetchesOnlyItsFrames) {
  TempDirectory dir;
  const std::string uri = Uri("two-gpus.vfs");
  ASSERT_CODE(Vf("demo -q -g 2 -s 24M -j 2 --no-dedup --to " + Q(uri) + " > /dev/null"), 0);

  CommandResult inspect = Vf("inspect --json " + Q(uri) + " 2>/dev/null");
  ASSERT_CODE(inspect, 0);
  ASSERT_NE(inspect.output.find("\"source\": \"seek index\""), std::string::npos) << inspect.output;
  const uint64_t stream_bytes = Number(inspect.output, "stream_bytes");
  const uint64_t index_bytes = Number(inspect.output, "bytes_read");
  ASSERT_GT(stream_bytes, 20u << 20);
  EXPECT_LT(index_bytes * 20, stream_bytes) << "inspect read more than 5% of the object";
  // Each object's frame bytes, by the GPU it is on (its "gpu" attribute follows it).
  uint64_t own = 0, other = 0;
  int own_objects = 0;
  for (size_t at = inspect.output.find("\"frame_bytes\""); at != std::string::npos;
       at = inspect.output.find("\"frame_bytes\"", at + 1)) {
    const uint64_t bytes = Number(inspect.output, "frame_bytes", at);
    const size_t gpu = inspect.output.find("\"gpu\": ", at);
    ASSERT_NE(gpu, std::string::npos);
    if (inspect.output.compare(gpu, 10, "\"gpu\": \"1\"") == 0) {
      own += bytes;
      ++own_objects;
    } else {
      other += bytes;
    }
  }
  ASSERT_EQ(own_objects, 7);
  ASSERT_GT(other, 0u);

  CommandResult one = Vf("unpack " + Q(uri) + " --gpu 1 -j 2 --max-memory 64M -o " + Q(dir.File("g1") + "/"));
  ASSERT_CODE(one, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(one.output, m, std::regex(R"(, (\d+) of (\d+) bytes\))"))) << one.output;
  const uint64_t fetched = std::stoull(m[1]);
  EXPECT_EQ(std::stoull(m[2]), stream_bytes);
  EXPECT_EQ(fetched, index_bytes + own) << "fetched more (or less) than the index and GPU 1's frames\n" << one.output;
  EXPECT_LT(fetched, stream_bytes * 6 / 10);

  ASSERT_CODE(Vf("unpack -q " + Q(uri) + " -j 2 --max-memory 64M -o " + Q(dir.File("all") + "/")), 0);
  std::vector<std::string> files = Files(dir.File("g1"));
  ASSERT_EQ(files.size(), 7u);
  for (const std::string& f : files) {
    EXPECT_EQ(f.rfind("gpu1/", 0), 0u) << f;
    EXPECT_TRUE(ReadFile(dir.File("g1/" + f)) == ReadFile(dir.File("all/" + f))) << f;
  }
}

//! With dedup, GPU 1's replicated weights are references to GPU 0's frames:
//! those DATA frames are fetched too, and the restore is still exact.
TEST_F(S3Rgw, RestoreOneGpuWithDedupFetchesTheFramesItsReferencesName) {
  TempDirectory dir;
  const std::string uri = Uri("two-gpus-dedup.vfs");
  ASSERT_CODE(Vf("demo -q -g 2 -s 16M -j 2 --to " + Q(uri) + " > /dev/null"), 0);
  CommandResult one = Vf("unpack " + Q(uri) + " --gpu 1 -j 2 -o " + Q(dir.File("g1") + "/"));
  ASSERT_CODE(one, 0);
  ASSERT_CODE(Vf("unpack -q " + Q(uri) + " -j 2 -o " + Q(dir.File("all") + "/")), 0);
  std::vector<std::string> files = Files(dir.File("g1"));
  ASSERT_EQ(files.size(), 7u) << one.output;
  for (const std::string& f : files) EXPECT_TRUE(ReadFile(dir.File("g1/" + f)) == ReadFile(dir.File("all/" + f))) << f;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(one.output, m, std::regex(R"(, (\d+) of (\d+) bytes\))"))) << one.output;
  EXPECT_LT(std::stoull(m[1]), std::stoull(m[2])) << one.output;
}

}  // namespace
}  // namespace vramflow
