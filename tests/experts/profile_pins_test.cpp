// How many of a profile's hottest experts the store pins: the count the profile's own
// replay says misses least, so stationary skewed routing gets pinned and drifting routing
// is left to the policy.
#include "experts/profile_pins.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "analysis/trace_helpers.h"

namespace sy {
namespace {

TEST(ProfilePins, OrdersExpertsByLoadAndDropsUnusedOnes) {
  // Layer 0: expert 2 in three steps, 0 in two, 3 in one; 1 never.
  const Trace t = test::trace_of_layered_sets(4, {{{2, 0}, {1}}, {{2, 3}, {1}}, {{2, 0}, {3}}});
  const auto order = experts_by_load(t);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], (std::vector<int>{2, 0, 3}));
  EXPECT_EQ(order[1], (std::vector<int>{1, 3}));  // ties: lower id first
}

TEST(ProfilePins, ReplaysPinnedExpertsAsHitsAndThePolicyOverTheRest) {
  // One layer of 4 experts, two slots. Requests 0,1 | 0,2 | 0,1 | 0,2.
  const Trace t = test::trace_of_sets(4, {{0, 1}, {0, 2}, {0, 1}, {0, 2}});
  // Expert 0 pinned: one slot left for 1 and 2, which alternate: every use misses.
  EXPECT_EQ(replay_layer_misses(t, 0, {0}, 2, "lru", 0.98), 4);
  // Nothing pinned, LRU over two slots: 0 stays (used every step), 1 and 2 alternate.
  EXPECT_EQ(replay_layer_misses(t, 0, {}, 2, "lru", 0.98), 5);
  EXPECT_EQ(replay_layer_misses(t, 0, {0, 1}, 2, "lru", 0.98), -1);  // no slot left
}

// Skewed popularity that stays the same from step to step (one token a step): pinning the
// hottest beats the policy's churn.
TEST(ProfilePins, PinsStationarySkewedRouting) {
  const int n_expert = 32, top_k = 4, capacity = 16, reserve = 2;
  const Trace t = test::random_trace(3, 1, n_expert, top_k, 400, 1);
  const auto pins = choose_pinned_experts(t, capacity, reserve, "eb-lfu", 0.98);
  ASSERT_EQ(pins.size(), 1u);
  const std::vector<int>& pinned = pins[0];
  EXPECT_GT(pinned.size(), 0u);
  EXPECT_LE(static_cast<int>(pinned.size()), capacity - reserve);
  const auto hot = experts_by_load(t)[0];
  EXPECT_TRUE(std::equal(pinned.begin(), pinned.end(), hot.begin())) << "the hottest ones";
  EXPECT_LT(replay_layer_misses(t, 0, pinned, capacity, "eb-lfu", 0.98),
            replay_layer_misses(t, 0, {}, capacity, "eb-lfu", 0.98));
}

// Two phases on disjoint experts: whatever is pinned from the whole profile is wrong for
// half of it, so nothing is pinned.
TEST(ProfilePins, LeavesDriftingRoutingToThePolicy) {
  std::vector<std::vector<int>> sets;
  for (int s = 0; s < 100; ++s) sets.push_back({s % 3, 3 + s % 2});
  for (int s = 0; s < 100; ++s) sets.push_back({5 + s % 3, 8 + s % 2});
  const Trace t = test::trace_of_sets(10, sets);
  EXPECT_EQ(choose_pinned_experts(t, 5, 1, "eb-lfu", 0.98), std::vector<std::vector<int>>{{}});
}

}  // namespace
}  // namespace sy
