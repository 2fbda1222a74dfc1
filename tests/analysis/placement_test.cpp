// Expert placement: hand-checked examples of greedy and anti-correlation balancing, and
// greedy never worse than contiguous placement on the data it was fitted on.
#include "analysis/placement.h"

#include <gtest/gtest.h>

#include "trace_helpers.h"

namespace sy {
namespace {

// Four experts with 4, 3, 2 and 1 tokens every step on 2 devices (2 slots each).
// Contiguous: {0,1} | {2,3} = 7 | 3, Max Load 7. Greedy: 0 -> d0 (4), 1 -> d1 (3),
// 2 -> d1 (5), 3 -> d0 (5): Max Load 5, the perfect balance.
TEST(AnalysisPlacement, GreedyBalancesMeanLoad) {
  Trace t;
  t.info = test::small_info(1, 4, 1);
  for (int s = 0; s < 4; ++s) t.add_step(10, {4, 3, 2, 1});
  const auto cont = place_experts(t, 0, 2, PlacementMethod::Contiguous, 0, 4);
  const auto greedy = place_experts(t, 0, 2, PlacementMethod::Greedy, 0, 4);
  EXPECT_EQ(cont, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(greedy, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(placement_load(t, 0, cont, 2, 0, 4).max_load, 7.0);
  const LoadMetrics g = placement_load(t, 0, greedy, 2, 0, 4);
  EXPECT_DOUBLE_EQ(g.max_load, 5.0);
  EXPECT_DOUBLE_EQ(g.avg_max_load, 5.0);
  EXPECT_DOUBLE_EQ(g.ideal, 5.0);
}

// Experts 0 and 2 are always active together, and so are 1 and 3, with equal mean loads.
// Greedy (mean load only) pairs 0 with 2 and 1 with 3: every step one device gets both
// tokens, Avg Max Load 2. Anti-correlation separates the pairs: Avg Max Load 1. Both
// have Max Load 1 (each device's mean load is 1).
TEST(AnalysisPlacement, AntiCorrelationSeparatesCoActiveExperts) {
  Trace t;
  t.info = test::small_info(1, 4, 2);
  for (int s = 0; s < 10; ++s)
    t.add_step(1, s % 2 ? std::vector<uint32_t>{0, 1, 0, 1} : std::vector<uint32_t>{1, 0, 1, 0});
  const auto greedy = place_experts(t, 0, 2, PlacementMethod::Greedy, 0, 10);
  const auto anti = place_experts(t, 0, 2, PlacementMethod::AntiCorrelation, 0, 10);
  EXPECT_EQ(greedy, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_NE(anti[0], anti[2]);
  EXPECT_NE(anti[1], anti[3]);
  EXPECT_DOUBLE_EQ(placement_load(t, 0, greedy, 2, 0, 10).avg_max_load, 2.0);
  EXPECT_DOUBLE_EQ(placement_load(t, 0, anti, 2, 0, 10).avg_max_load, 1.0);
  EXPECT_DOUBLE_EQ(placement_load(t, 0, anti, 2, 0, 10).max_load, 1.0);
}

TEST(AnalysisPlacement, EveryDeviceHoldsItsShareOfExperts) {
  const Trace t = test::random_trace(3, 1, 12, 2, 60, 8);
  for (int d : {2, 4, 5, 8}) {
    for (PlacementMethod m : kPlacementMethods) {
      const auto dev = place_experts(t, 0, d, m, 0, 30);
      std::vector<int> per(d, 0);
      for (int x : dev) {
        ASSERT_GE(x, 0);
        ASSERT_LT(x, d);
        ++per[x];
      }
      for (int n : per) EXPECT_LE(n, (12 + d - 1) / d) << placement_name(m) << " on " << d << " devices";
    }
  }
}

TEST(AnalysisPlacement, GreedyNeverWorseThanContiguousOnFittingHalf) {
  for (uint32_t seed = 0; seed < 60; ++seed) {
    const int n_expert = 8 << (seed % 3);  // 8, 16, 32
    const Trace t = test::random_trace(100 + seed, 2, n_expert, 2, 80, seed % 2 ? 1 : 16);
    for (int d : {2, 4, 8}) {
      const auto study = placement_study(t, d);
      ASSERT_EQ(study[0].method, PlacementMethod::Contiguous);
      ASSERT_EQ(study[1].method, PlacementMethod::Greedy);
      EXPECT_LE(study[1].fit.max_load, study[0].fit.max_load + 1e-9)
          << "seed " << seed << ", " << d << " devices";
    }
  }
}

}  // namespace
}  // namespace sy
