// Static gating with enough capacity gives exactly the dynamic-gating result; a small
// capacity drops tokens and changes the output. Dynamic gating never reads an expert
// that got no token.
#include <gtest/gtest.h>

#include <cmath>

#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"

namespace sy {
namespace {

std::vector<float> logits_of(const Model& m, const std::vector<int32_t>& tokens, MoeOptions opt,
                             int64_t* dropped = nullptr) {
  ThreadPool pool(2);
  Session s(m, pool, 64, opt);
  s.eval(tokens, true);
  if (dropped) {
    *dropped = 0;
    for (const auto& st : s.forward().moe_stats()) *dropped += st.dropped;
  }
  const int64_t nv = m.hparams().n_vocab;
  return std::vector<float>(s.logits(0), s.logits(0) + tokens.size() * nv);
}

const std::vector<int32_t> kTokens = {1, 15043, 3186, 29892, 920, 526, 366, 9826, 29973, 450, 4996, 17354};

TEST(MoeGating, StaticWithLargeCapacityEqualsDynamic) {
  auto m = Model::load(test::shared_path("fixtures/mixtral/model.gguf"));
  const auto dyn = logits_of(*m, kTokens, {});
  int64_t dropped = -1;
  // capacity factor n_expert / k: one expert could take every token.
  const auto stat = logits_of(*m, kTokens, {GatingMode::Static, 4.0}, &dropped);
  EXPECT_EQ(dropped, 0);
  // Same expert rows and kernels; only the combine sums in (expert, slot) order rather
  // than choice order, so equal up to float rounding.
  ASSERT_EQ(dyn.size(), stat.size());
  for (size_t i = 0; i < dyn.size(); ++i) ASSERT_NEAR(dyn[i], stat[i], 1e-5 * (1 + std::fabs(dyn[i]))) << i;
}

TEST(MoeGating, StaticWithSmallCapacityDropsTokens) {
  auto m = Model::load(test::shared_path("fixtures/mixtral/model.gguf"));
  const auto dyn = logits_of(*m, kTokens, {});
  int64_t dropped = 0;
  const auto stat = logits_of(*m, kTokens, {GatingMode::Static, 0.25}, &dropped);
  EXPECT_GT(dropped, 0);
  EXPECT_NE(dyn, stat);
}

TEST(MoeGating, DynamicTouchesOnlyRoutedExperts) {
  auto m = Model::load(test::shared_path("fixtures/olmoe/model.gguf"));
  ThreadPool pool(1);
  Session s(*m, pool, 16);
  s.eval({42});  // one token: exactly k experts per layer
  for (const auto& st : s.forward().moe_stats()) {
    EXPECT_EQ(st.active_experts, m->hparams().n_expert_used);
    EXPECT_EQ(st.rows_computed, m->hparams().n_expert_used);
  }
}

}  // namespace
}  // namespace sy
