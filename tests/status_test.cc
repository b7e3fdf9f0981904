// SPDX-License-Identifier: MIT
#include "common/status.h"

#include <gtest/gtest.h>

#include "common/units.h"

namespace vramflow {
namespace {

TEST(StatusTest, OkCarriesNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, ContextIsPrefixed) {
  Status s = Status::Corruption("bad magic").WithContext("stream header at offset 0");
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.ToString(), "corruption: stream header at offset 0: bad magic");
}

TEST(UnitsTest, ParsesSuffixes) {
  EXPECT_EQ(ParseSize("64M").value(), 64ull << 20);
  EXPECT_EQ(ParseSize("1.5GiB").value(), 3ull << 29);
  EXPECT_EQ(ParseSize("4096").value(), 4096u);
  EXPECT_FALSE(ParseSize("12X").ok());
  EXPECT_FALSE(ParseSize("M").ok());
  EXPECT_FALSE(ParseSize("0.5").ok());
}

}  // namespace
}  // namespace vramflow
