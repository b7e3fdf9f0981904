// SPDX-License-Identifier: MIT
// `pack` and `unpack` of many more files than the process may hold open
// (issue 18, defect 8): the file device opens files when a copy needs them
// and keeps only a few open, so the file count is not bounded by `ulimit -n`.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::PackToMemory;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::ShellQuote;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::TestObject;
using ::vramflow::testing::VramflowBinary;
using ::vramflow::testing::WriteFileBytes;

constexpr int kFiles = 1500;
constexpr char kLimit[] = "ulimit -n 256";  // far below kFiles

// Runs a shell line under kLimit in `dir`, with $VF the built binary.
::vramflow::testing::CommandResult LimitedSh(const std::string& dir, const std::string& line) {
  ::vramflow::testing::CommandResult r;
  r.code = RunCommand("( " + std::string(kLimit) + " && cd " + ShellQuote(dir) +
                          " && VF=" + ShellQuote(VramflowBinary()) + " && " + line + " )",
                      &r.output);
  return r;
}

// kFiles small objects of 1 to 4 KiB; every tenth is a copy of an earlier
// one, so that its chunks become references to another object's bytes.
std::vector<TestObject> ManySmallObjects() {
  std::vector<TestObject> objects;
  for (int i = 0; i < kFiles; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "f%04d", i);
    std::vector<uint8_t> bytes;
    if (i % 10 == 9) {
      bytes = objects[static_cast<size_t>(i - 7)].bytes;
    } else {
      bytes.resize(1024 + static_cast<size_t>(i % 4) * 1000);
      uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
      for (uint8_t& b : bytes) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b = static_cast<uint8_t>(x % 16);  // compressible, and never the same twice
      }
    }
    objects.push_back({name, std::move(bytes)});
  }
  return objects;
}

void ExpectEveryByteBack(const std::vector<TestObject>& objects, const std::string& dir) {
  int wrong = 0;
  for (const TestObject& o : objects)
    if (ReadFileBytes(dir + "/" + o.name) != o.bytes && ++wrong <= 3) ADD_FAILURE() << o.name << " differs";
  EXPECT_EQ(wrong, 0);
}

//! pack reads 1500 files and unpack restores them (dedup references into
//! finished objects included) while only 256 fds may be open.
TEST(CliOpenFilesTest, PackAndUnpackManyMoreFilesThanTheFdLimit) {
  TempDir dir;
  const std::vector<TestObject> objects = ManySmallObjects();
  std::filesystem::create_directory(dir.File("in"));
  std::string names;
  for (const TestObject& o : objects) {
    WriteFileBytes(dir.File("in/" + o.name), o.bytes);
    names += " in/" + o.name;
  }
  auto p = LimitedSh(dir.path(), "$VF pack" + names + " -o s.vfs --chunk-size 1K --quiet");
  ASSERT_EQ(p.code, 0) << p.output;
  auto v = LimitedSh(dir.path(), "$VF inspect --json s.vfs | grep -cE '\"dedup_refs\": [1-9]'");
  EXPECT_EQ(v.code, 0) << "the stream should hold dedup references\n" << v.output;
  auto u = LimitedSh(dir.path(), "$VF unpack s.vfs -o out/ --quiet");
  ASSERT_EQ(u.code, 0) << u.output;
  ExpectEveryByteBack(objects, dir.File("out"));
}

//! unpack restores a stream whose 1500 objects are all open at once (their
//! chunks interleave) while only 256 fds may be open.
TEST(CliOpenFilesTest, UnpackOfManyInterleavedObjectsUnderTheFdLimit) {
  TempDir dir;
  const std::vector<TestObject> objects = ManySmallObjects();
  WriteFileBytes(dir.File("s.vfs"), PackToMemory(objects, EncoderOptions{}, 1024, /*interleave=*/true));
  auto u = LimitedSh(dir.path(), "$VF unpack s.vfs -o out/ --quiet");
  ASSERT_EQ(u.code, 0) << u.output;
  ExpectEveryByteBack(objects, dir.File("out"));
}

}  // namespace
}  // namespace vramflow
