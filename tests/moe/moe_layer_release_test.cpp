// A MoE layer whose expert store fails to deliver an expert (a failed disk read) still
// releases every expert the store pinned for it: a server goes on after a failed step,
// and pins left behind would hold the layer's cache slots for good.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "moe/moe_layer.h"

namespace sy {
namespace {

constexpr int kExperts = 4, kEmbd = 32, kFf = 16;

WeightMatrix f32_matrix(int64_t rows, int64_t cols, std::vector<float>& storage, float seed) {
  storage.resize(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = 0.01f * static_cast<float>((i * 7 + 3) % 11) - seed;
  return WeightMatrix{DType::F32, rows, cols, reinterpret_cast<const uint8_t*>(storage.data()), "test", false};
}

// Plans the first expert alone and the others together (as a tiered store splits resident
// from loading ones), and fails to deliver `failing`.
class FailingStore : public ExpertStore {
 public:
  explicit FailingStore(int failing) : failing_(failing) {
    for (int e = 0; e < kExperts; ++e) {
      FfnWeights& w = weights_[e];
      w.gate = f32_matrix(kFf, kEmbd, data_[e][0], 0.01f * e);
      w.up = f32_matrix(kFf, kEmbd, data_[e][1], 0.02f * e);
      w.down = f32_matrix(kEmbd, kFf, data_[e][2], 0.03f * e);
    }
  }
  void plan_layer(int, const std::vector<int32_t>& experts, const std::vector<int64_t>&,
                  std::vector<std::vector<int32_t>>& groups) override {
    planned.insert(experts.begin(), experts.end());
    groups.assign(1, {experts.front()});
    if (experts.size() > 1) groups.emplace_back(experts.begin() + 1, experts.end());
  }
  const FfnWeights& acquire(int, int expert) override {
    if (expert == failing_) throw Error("expert " + std::to_string(expert) + ": read failed");
    return weights_[expert];
  }
  void release(int, int expert) override { released.push_back(expert); }
  size_t expert_bytes(int, int expert) const override { return weights_[expert].bytes(); }

  std::set<int32_t> planned;
  std::vector<int32_t> released;

 private:
  int failing_;
  FfnWeights weights_[kExperts];
  std::vector<float> data_[kExperts][3];
};

TEST(MoeLayerRelease, AFailedExpertLeavesNoPinBehind) {
  // Router rows favour experts 0 and 1 for every token, then 2 and 3: all four are used.
  std::vector<float> router_w(static_cast<size_t>(kExperts * kEmbd), 0.0f);
  for (int e = 0; e < kExperts; ++e) router_w[static_cast<size_t>(e * kEmbd + e)] = 1.0f;
  const WeightMatrix router{DType::F32, kExperts, kEmbd, reinterpret_cast<const uint8_t*>(router_w.data()), "router",
                            false};
  std::vector<float> x(static_cast<size_t>(kExperts * kEmbd), 0.0f), out(x.size(), 0.0f);
  for (int t = 0; t < kExperts; ++t) x[static_cast<size_t>(t * kEmbd + t)] = 5.0f;  // token t picks expert t first
  RouterRules rules;
  rules.n_expert = kExperts;
  rules.k = 2;
  ThreadPool pool(2);
  CpuBackend backend(pool);

  for (int failing : {-1, 0, 2}) {
    SCOPED_TRACE("failing expert " + std::to_string(failing));
    FailingStore store(failing);
    MoeLayer layer;
    if (failing < 0) {
      layer.forward(x.data(), kExperts, kEmbd, router, rules, store, 0, {}, out.data(), kEmbd, backend, pool);
    } else {
      EXPECT_THROW(
          layer.forward(x.data(), kExperts, kEmbd, router, rules, store, 0, {}, out.data(), kEmbd, backend, pool),
          Error);
    }
    ASSERT_EQ(store.planned.size(), static_cast<size_t>(kExperts));
    std::vector<int32_t> released = store.released;
    std::sort(released.begin(), released.end());
    EXPECT_EQ(released, std::vector<int32_t>(store.planned.begin(), store.planned.end()))
        << "every planned expert released exactly once";
  }
}

}  // namespace
}  // namespace sy
