// Log-probabilities of a logits row against a direct computation in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/token_logprobs.h"

namespace sy {
namespace {

TEST(TokenLogprobs, LogSoftmaxAndTopKWithTiesToTheLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f};
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x));
  LogprobRow row;
  row.compute(logits.data(), static_cast<int64_t>(logits.size()), 3);
  for (int32_t id = 0; id < 6; ++id)
    EXPECT_NEAR(row.logprob(id), logits[static_cast<size_t>(id)] - std::log(sum), 1e-6) << id;
  ASSERT_EQ(row.top().size(), 3u);
  EXPECT_EQ(row.top()[0].first, 1);  // 3.0 twice: the lower id first
  EXPECT_EQ(row.top()[1].first, 3);
  EXPECT_EQ(row.top()[2].first, 5);
  EXPECT_FLOAT_EQ(row.top()[2].second, row.logprob(5));

  // More alternatives than tokens: all of them, in order; none asked: none.
  row.compute(logits.data(), 2, 5);
  ASSERT_EQ(row.top().size(), 2u);
  EXPECT_EQ(row.top()[0].first, 1);
  EXPECT_NEAR(std::exp(row.top()[0].second) + std::exp(row.top()[1].second), 1.0, 1e-6);
  row.compute(logits.data(), 6, 0);
  EXPECT_TRUE(row.top().empty());
}

}  // namespace
}  // namespace sy
