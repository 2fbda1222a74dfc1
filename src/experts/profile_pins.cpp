#include "experts/profile_pins.h"

#include <algorithm>
#include <numeric>

#include "experts/cache_policy.h"

namespace sy {

std::vector<std::vector<int>> experts_by_load(const Trace& profile) {
  const int n_moe = profile.info.n_moe(), n_expert = profile.info.n_expert;
  std::vector<std::vector<int>> out(n_moe);
  std::vector<double> load(n_expert);
  for (int m = 0; m < n_moe; ++m) {
    std::fill(load.begin(), load.end(), 0.0);
    for (int64_t s = 0; s < profile.n_steps(); ++s)
      for (int e = 0; e < n_expert; ++e) load[e] += profile.count(s, m, e);
    std::vector<int>& order = out[m];
    order.resize(n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
    while (!order.empty() && load[order.back()] <= 0) order.pop_back();
  }
  return out;
}

int64_t replay_layer_misses(const Trace& profile, int moe_layer, const std::vector<int>& pinned, int capacity,
                            const std::string& policy, double lfu_decay, int64_t first_step) {
  const int n_expert = profile.info.n_expert;
  const int free_slots = capacity - static_cast<int>(pinned.size());
  if (free_slots < 1) return -1;
  std::vector<uint8_t> is_pinned(n_expert, 0);
  for (int e : pinned) is_pinned[e] = 1;
  // One pool: units are this layer's expert ids.
  ExpertCache cache(1, n_expert, CacheScope::PerLayer, free_slots, make_policy(policy, n_expert, lfu_decay));
  std::vector<int> units;
  int64_t misses = 0;
  for (int64_t s = std::max<int64_t>(first_step, 0); s < profile.n_steps(); ++s) {
    cache.begin_step();
    const uint32_t* c = profile.step_layer(s, moe_layer);
    units.clear();
    for (int e = 0; e < n_expert; ++e) {
      if (c[e] > 0 && !is_pinned[e]) units.push_back(e);
    }
    misses += cache.serve_layer(units, [&](int u) { return c[u]; });
  }
  return misses;
}

std::vector<std::vector<int>> choose_pinned_experts(const Trace& profile, int capacity, int reserve,
                                                    const std::string& policy, double lfu_decay) {
  std::vector<std::vector<int>> pins = experts_by_load(profile);
  const int64_t first = std::max<int64_t>(0, profile.n_steps() - kPinReplaySteps);
  for (size_t m = 0; m < pins.size(); ++m) {
    const int most = std::min(capacity - std::max(reserve, 1), static_cast<int>(pins[m].size()));
    const int stride = std::max(1, (most + 31) / 32);
    int64_t best = -1;
    int best_n = 0;
    for (int n = 0; n <= most; n = n == most ? most + 1 : std::min(n + stride, most)) {
      const std::vector<int> pinned(pins[m].begin(), pins[m].begin() + n);
      const int64_t misses =
          replay_layer_misses(profile, static_cast<int>(m), pinned, capacity, policy, lfu_decay, first);
      if (best < 0 || misses < best) {
        best = misses;
        best_n = n;
      }
    }
    pins[m].resize(best_n);
  }
  return pins;
}

}  // namespace sy
