// SPDX-License-Identifier: MIT
// The dump's KFD file list: what the main CRIU process reads to know how
// many KFD files to wait for in POST_FORKING.
#include "plugin/kfd_file_list.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vramflow {
namespace {

TEST(KfdFileList, RoundTripsAndIsAbsentWhenNeverWritten) {
  testing::TempDir dir;
  std::unique_ptr<ImageStore> images = DirectoryStore(dir.path());
  Result<std::optional<std::vector<int>>> none = ReadKfdFileList(*images);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteKfdFileList(*images, {19, 23, 0}).ok());
  Result<std::optional<std::vector<int>>> read = ReadKfdFileList(*images);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, (std::vector<int>{19, 23, 0}));
}

TEST(KfdFileList, RefusesWhatItDidNotWrite) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "empty"},
      {"vramflow kfd files 2\n", "does not start with"},
      {"vramflow kfd files 1\n19", "line 2 does not end"},
      {"vramflow kfd files 1\n19\nx\n", "line 3 is not a file id"},
      {"vramflow kfd files 1\n-4\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n 4\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n99999999999\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n7\n7\n", "line 3 repeats id 7"},
  };
  for (const auto& c : cases) {
    Result<std::vector<int>> ids = ParseKfdFileList(c.text);
    ASSERT_FALSE(ids.ok()) << c.text;
    EXPECT_NE(ids.status().ToString().find(c.error), std::string::npos) << ids.status().ToString();
  }
  EXPECT_TRUE(ParseKfdFileList("vramflow kfd files 1\n").ok());  // no KFD file: never written, but valid
}

}  // namespace
}  // namespace vramflow
