// SPDX-License-Identifier: MIT
// The dump's KFD file list: what the main CRIU process reads to know how
// many KFD files to wait for in POST_FORKING.
#include "plugin/kfd_file_list.h"

#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

TEST(KfdFileList, RoundTripsAndIsAbsentWhenNeverWritten) {
  testing::TempDir dir;
  std::unique_ptr<ImageStore> images = DirectoryStore(dir.path());
  Result<std::optional<KfdFileList>> none = ReadKfdFileList(*images);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  const std::string dump_id = NewDumpId();
  ASSERT_TRUE(IsDumpId(dump_id)) << dump_id;
  EXPECT_NE(NewDumpId(), dump_id);
  ASSERT_TRUE(WriteKfdFileList(*images, {{19, 23, 0}, dump_id}).ok());
  Result<std::optional<KfdFileList>> read = ReadKfdFileList(*images);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->ids, (std::vector<int>{19, 23, 0}));
  EXPECT_EQ((*read)->dump_id, dump_id);
  // An older vramflow's list (version 1) has no dump id, and is still read.
  ASSERT_TRUE(WriteKfdFileList(*images, {{5}, ""}).ok());
  read = ReadKfdFileList(*images);
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
  EXPECT_EQ((*read)->ids, std::vector<int>{5});
  EXPECT_EQ((*read)->dump_id, "");
}

TEST(KfdFileList, RefusesWhatItDidNotWrite) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "empty"},
      {"vramflow kfd files 3\n", "does not start with"},
      {"vramflow kfd files 2\n", "line 2 is missing"},
      {"vramflow kfd files 2\n7\n", "line 2 is not 'dump-id'"},
      {"vramflow kfd files 2\ndump-id 0123456789ABCDEF0123456789abcdef\n", "line 2 is not 'dump-id'"},
      {"vramflow kfd files 2\ndump-id 0123456789abcdef0123456789abcde\n", "line 2 is not 'dump-id'"},
      {"vramflow kfd files 1\n19", "line 2 does not end"},
      {"vramflow kfd files 1\n19\nx\n", "line 3 is not a file id"},
      {"vramflow kfd files 1\n-4\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n 4\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n99999999999\n", "line 2 is not a file id"},
      {"vramflow kfd files 1\n7\n7\n", "line 3 repeats id 7"},
  };
  for (const auto& c : cases) {
    Result<KfdFileList> ids = ParseKfdFileList(c.text);
    ASSERT_FALSE(ids.ok()) << c.text;
    EXPECT_NE(ids.status().ToString().find(c.error), std::string::npos) << ids.status().ToString();
  }
  EXPECT_TRUE(ParseKfdFileList("vramflow kfd files 1\n").ok());  // no KFD file: never written, but valid
  Result<KfdFileList> v2 = ParseKfdFileList("vramflow kfd files 2\ndump-id 0123456789abcdef0123456789abcdef\n4\n");
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->ids, std::vector<int>{4});
}

}  // namespace
}  // namespace vramflow
