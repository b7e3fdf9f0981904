// SPDX-License-Identifier: MIT
// LentSlots: a slot lent to the sink comes back only once the sink has
// released it, oldest first; past the limit the write stage waits for the
// oldest; the sink is told to drop lent bytes when the stage is gone.
#include "streamer/device/lent_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace vramflow {
namespace {

// Releases tickets when the test says so; WaitReleased() stands for the
// sink's thread finishing the write waited for.
class LendingSink final : public ByteSink {
 public:
  Status Write(std::span<const uint8_t>) override { return Status::Ok(); }
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return "lending sink"; }
  bool Released(uint64_t ticket) override { return ticket <= released; }
  void WaitReleased(uint64_t ticket) override {
    waited.push_back(ticket);
    released = std::max(released, ticket);
  }
  void DropBorrowed() override { ++drops; }

  uint64_t released = 0;
  std::vector<uint64_t> waited;
  int drops = 0;
};

TEST(LentSlots, SlotsComeBackOnceReleasedOldestFirstAndWaitPastTheLimit) {
  LendingSink sink;
  std::vector<uint32_t> back;
  const auto give_back = [&](uint32_t slot) { back.push_back(slot); };
  {
    LentSlots lent(&sink, 2);
    lent.Return(10, 1, give_back);  // lent, not released
    lent.Return(11, 0, give_back);  // nothing lent: back at once
    EXPECT_EQ(back, (std::vector<uint32_t>{11}));
    lent.Return(12, 2, give_back);
    EXPECT_TRUE(sink.waited.empty());
    lent.Return(13, 3, give_back);  // a third out, over the limit of 2: waits for the oldest
    EXPECT_EQ(sink.waited, (std::vector<uint64_t>{1}));
    EXPECT_EQ(back, (std::vector<uint32_t>{11, 10}));
    EXPECT_EQ(lent.out(), 2u);
    sink.released = 2;  // the sink is done with 12's payload, not yet 13's
    lent.Return(14, 0, give_back);
    EXPECT_EQ(back, (std::vector<uint32_t>{11, 10, 14, 12}));
    EXPECT_EQ(lent.out(), 1u);
    lent.WaitAll();
    EXPECT_EQ(sink.waited, (std::vector<uint64_t>{1, 3}));
    EXPECT_EQ(lent.out(), 0u);
    EXPECT_EQ(back.size(), 4u);  // after the graph, slots are not given back
    EXPECT_EQ(sink.drops, 0);
  }
  EXPECT_EQ(sink.drops, 1);
}

}  // namespace
}  // namespace vramflow
