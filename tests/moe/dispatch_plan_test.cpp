// Dispatch plans on hand-made routing: empty experts, all tokens to one expert, k > 1,
// ties in the router, and the static-capacity baseline.
#include <gtest/gtest.h>

#include <cmath>

#include "moe/dispatch_plan.h"
#include "moe/router.h"

namespace sy {
namespace {

Routing make_routing(int k, std::vector<int32_t> experts) {
  Routing r;
  r.k = k;
  r.n_tokens = static_cast<int64_t>(experts.size()) / k;
  r.expert = std::move(experts);
  for (size_t i = 0; i < r.expert.size(); ++i) r.weight.push_back(0.1f * static_cast<float>(i + 1));
  return r;
}

// Every (token, choice) appears exactly once, in its expert's block, at its slot.
void expect_consistent(const Routing& r, const DispatchPlan& p) {
  for (int64_t t = 0; t < r.n_tokens; ++t) {
    for (int j = 0; j < r.k; ++j) {
      const int64_t s = p.slot[t * r.k + j];
      if (s < 0) continue;
      const int e = r.expert[t * r.k + j];
      EXPECT_GE(s, p.offset[e]);
      EXPECT_LT(s, p.offset[e + 1]);
      EXPECT_EQ(p.row_token[s], t);
    }
  }
}

TEST(DispatchPlan, CountingSortGroupsTokensByExpert) {
  // 4 tokens, top-2 of 5 experts; expert 3 gets nothing.
  const Routing r = make_routing(2, {0, 2, 2, 0, 4, 2, 0, 1});
  DispatchPlan p;
  build_dynamic_plan(r, 5, p);
  EXPECT_EQ(p.offset, (std::vector<int64_t>{0, 3, 4, 7, 7, 8}));
  EXPECT_EQ(p.row_token, (std::vector<int32_t>{0, 1, 3, 3, 0, 1, 2, 2}));
  EXPECT_EQ(p.active, (std::vector<int32_t>{0, 1, 2, 4}));
  EXPECT_EQ(p.rows(3), 0);
  EXPECT_EQ(p.n_dropped(), 0);
  expect_consistent(r, p);
}

TEST(DispatchPlan, AllTokensToOneExpert) {
  const Routing r = make_routing(1, {6, 6, 6, 6, 6, 6, 6});
  DispatchPlan p;
  build_dynamic_plan(r, 8, p);
  EXPECT_EQ(p.active, (std::vector<int32_t>{6}));
  EXPECT_EQ(p.rows(6), 7);
  EXPECT_EQ(p.n_rows(), 7);
  expect_consistent(r, p);
}

TEST(DispatchPlan, EmptyBatch) {
  const Routing r = make_routing(2, {});
  DispatchPlan p;
  build_dynamic_plan(r, 4, p);
  EXPECT_TRUE(p.active.empty());
  EXPECT_EQ(p.n_rows(), 0);
}

TEST(DispatchPlan, RejectsOutOfRangeExpert) {
  const Routing r = make_routing(1, {0, 9});
  DispatchPlan p;
  EXPECT_ANY_THROW(build_dynamic_plan(r, 4, p));
}

TEST(DispatchPlan, StaticLargeCapacityKeepsEverything) {
  const Routing r = make_routing(2, {0, 2, 2, 0, 4, 2, 0, 1});
  DispatchPlan p;
  // Capacity factor = n_expert / k covers every token going to one expert.
  build_static_plan(r, 5, 2.5, p);
  EXPECT_EQ(static_capacity(4, 2, 5, 2.5), 4);
  EXPECT_EQ(p.n_dropped(), 0);
  EXPECT_EQ(p.n_rows(), 20);  // every expert padded to 4 rows
  EXPECT_EQ(p.active.size(), 5u);
  expect_consistent(r, p);
}

TEST(DispatchPlan, StaticSmallCapacityDropsOverflowByChoiceRank) {
  // 4 tokens top-2; capacity = ceil(0.5 * 8 / 4) = 1 slot per expert.
  const Routing r = make_routing(2, {0, 1, 0, 1, 0, 2, 3, 0});
  DispatchPlan p;
  build_static_plan(r, 4, 0.5, p);
  EXPECT_EQ(static_capacity(4, 2, 4, 0.5), 1);
  // First choices are admitted first: token 0 -> expert 0, token 3 -> expert 3;
  // then second choices: token 0 -> expert 1, token 2 -> expert 2.
  EXPECT_EQ(p.slot[0 * 2 + 0], 0);
  EXPECT_EQ(p.slot[1 * 2 + 0], -1);  // expert 0 full
  EXPECT_EQ(p.slot[2 * 2 + 0], -1);
  EXPECT_EQ(p.slot[3 * 2 + 0], 3);
  EXPECT_EQ(p.slot[0 * 2 + 1], 1);
  EXPECT_EQ(p.slot[1 * 2 + 1], -1);  // expert 1 full
  EXPECT_EQ(p.slot[2 * 2 + 1], 2);
  EXPECT_EQ(p.slot[3 * 2 + 1], -1);  // expert 0 full
  EXPECT_EQ(p.n_dropped(), 4);
  expect_consistent(r, p);
}

TEST(Router, SoftmaxTopKAndRenormalisation) {
  // Logits for 2 tokens over 4 experts.
  const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f,   0.5f, 0.5f, 0.5f, 0.5f};
  Routing r;
  route(logits, 4, 2, {4, 2, false, 1.0f}, r);
  EXPECT_EQ(r.expert[0], 1);
  EXPECT_EQ(r.expert[1], 2);
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(r.weight[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weight[1], std::exp(2.0) / z, 1e-6);
  // Exact ties go to the lower expert id.
  EXPECT_EQ(r.expert[2], 0);
  EXPECT_EQ(r.expert[3], 1);
  EXPECT_NEAR(r.weight[2], 0.25, 1e-6);

  route(logits, 4, 2, {4, 2, true, 1.0f}, r);
  EXPECT_NEAR(r.weight[0] + r.weight[1], 1.0, 1e-6);
  EXPECT_NEAR(r.weight[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  route(logits, 4, 2, {4, 2, true, 2.0f}, r);
  EXPECT_NEAR(r.weight[2] + r.weight[3], 2.0, 1e-6);
}

}  // namespace
}  // namespace sy
