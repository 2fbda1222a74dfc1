// The MoE's token movement on the CPU backend: gather copies each expert row's source
// token, combine adds each token's experts in choice order, on the calling thread for a
// decode step's few rows and across the pool for a prompt's many. Both paths give every
// token the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"

namespace sy {
namespace {

struct Routed {
  int64_t n, k, d;
  std::vector<float> rows;    // n * k expert output rows of d floats
  std::vector<int64_t> slot;  // per (token, choice): its row, or -1 (dropped)
  std::vector<float> weight;  // per (token, choice)
};

Routed make_routed(int64_t n, int k, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Routed r{n, k, d, std::vector<float>(static_cast<size_t>(n * k * d)), {}, {}};
  for (float& v : r.rows) v = u(rng);
  std::vector<int64_t> order(static_cast<size_t>(n * k));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::shuffle(order.begin(), order.end(), rng);  // rows of a token lie anywhere, as after a sort by expert
  for (int64_t i = 0; i < n * k; ++i) {
    r.slot.push_back(i % 7 == 3 ? -1 : order[static_cast<size_t>(i)]);
    r.weight.push_back(0.5f + 0.5f * u(rng));
  }
  return r;
}

std::vector<float> combine(const Routed& r, int threads) {
  ThreadPool pool(threads);
  CpuBackend backend(pool);
  const int64_t ld = r.d + 5;  // an output stride wider than a row
  std::vector<float> out(static_cast<size_t>(r.n * ld), NAN);
  backend.combine_rows(r.rows.data(), r.slot.data(), r.weight.data(), r.n, static_cast<int>(r.k), r.d,
                       out.data(), ld);
  std::vector<float> packed;
  for (int64_t t = 0; t < r.n; ++t)
    packed.insert(packed.end(), out.begin() + t * ld, out.begin() + t * ld + r.d);
  return packed;
}

TEST(TokenMovement, CombineAddsEachTokensExpertsInChoiceOrder) {
  // 3 x 4 x 300 floats run inline, 64 x 4 x 300 across the pool.
  for (int64_t n : {3, 64}) {
    const Routed r = make_routed(n, 4, 300, 11);
    const std::vector<float> got = combine(r, 2);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < r.d; ++i) {
        double want = 0.0;
        for (int64_t j = 0; j < r.k; ++j) {
          const int64_t s = r.slot[t * r.k + j];
          if (s >= 0) want += double{r.weight[t * r.k + j]} * r.rows[s * r.d + i];
        }
        ASSERT_NEAR(got[t * r.d + i], want, 1e-5) << "n " << n << " token " << t << " value " << i;
      }
    }
  }
}

TEST(TokenMovement, CombineGivesATokenTheSameBitsInlineAndAcrossThePool) {
  const Routed many = make_routed(64, 4, 300, 5);
  const std::vector<float> pooled = combine(many, 2);
  // The first 3 tokens alone are small enough to run inline.
  Routed few = many;
  few.n = 3;
  few.slot.resize(3 * 4);
  few.weight.resize(3 * 4);
  const std::vector<float> inline_sums = combine(few, 2);
  for (size_t i = 0; i < inline_sums.size(); ++i) ASSERT_EQ(inline_sums[i], pooled[i]) << i;
  EXPECT_EQ(combine(many, 1), pooled);
}

TEST(TokenMovement, GatherCopiesEachRowsSourceToken) {
  for (int64_t rows : {5, 400}) {  // inline, then across the pool
    const int64_t d = 256, ld = 260, tokens = 37;
    std::vector<float> x(static_cast<size_t>(tokens * ld));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    std::vector<int32_t> row_token;
    for (int64_t r = 0; r < rows; ++r) row_token.push_back(static_cast<int32_t>((r * 13) % tokens));
    ThreadPool pool(2);
    CpuBackend backend(pool);
    std::vector<float> out(static_cast<size_t>(rows * d));
    backend.gather_rows(x.data(), ld, row_token.data(), rows, d, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < d; ++i) ASSERT_EQ(out[r * d + i], x[row_token[r] * ld + i]) << r << " " << i;
    }
  }
}

}  // namespace
}  // namespace sy
