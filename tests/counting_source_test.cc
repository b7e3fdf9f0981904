// SPDX-License-Identifier: MIT
// CountingSource: counts what is read through it, in place or copied, and
// passes reads in place and what is done with on to its source.
#include "transport/core/counting_source.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/poisoning_source.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

TEST(CountingSourceTest, CountsReadsInPlaceAndPassesOnWhatIsDone) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  testing::PoisoningSource inner(bytes);
  CountingSource counting(&inner);
  std::optional<std::span<const uint8_t>> first = counting.ReadInPlace(100);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 100u);
  EXPECT_EQ((*first)[99], bytes[99]);
  std::vector<uint8_t> copied(50);
  Result<size_t> n = counting.Read(copied);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 50u);
  EXPECT_EQ(copied[0], bytes[100]);
  EXPECT_EQ(counting.bytes(), 150u);
  EXPECT_EQ(inner.in_place_reads(), 1u);
  counting.DoneBefore(first->data() + first->size());
  EXPECT_EQ(inner.poisoned(), 100u) << "the source is told what is done with";
  // At the end of input, fewer bytes in place, counted as they are.
  std::optional<std::span<const uint8_t>> rest = counting.ReadInPlace(5000);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->size(), 850u);
  EXPECT_EQ(counting.bytes(), 1000u);
}

TEST(CountingSourceTest, ASourceThatOnlyCopiesStaysCopying) {
  const std::vector<uint8_t> bytes(300, 1);
  MemorySource inner(bytes);
  CountingSource counting(&inner);
  EXPECT_FALSE(counting.ReadInPlace(10).has_value());
  EXPECT_EQ(counting.bytes(), 0u) << "nothing was consumed";
  std::vector<uint8_t> all(300);
  ASSERT_TRUE(counting.Read(all).ok());
  EXPECT_EQ(counting.bytes(), 300u);
}

}  // namespace
}  // namespace vramflow
