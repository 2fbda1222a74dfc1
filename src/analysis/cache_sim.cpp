#include "analysis/cache_sim.h"

#include <algorithm>

#include "base/error.h"

namespace sy {

std::vector<std::vector<int>> demand_groups(const Trace& t) {
  std::vector<std::vector<int>> groups;
  const int n_expert = t.info.n_expert;
  for (int64_t s = 0; s < t.n_steps(); ++s) {
    for (int l = 0; l < t.info.n_moe(); ++l) {
      const uint32_t* c = t.step_layer(s, l);
      std::vector<int>& g = groups.emplace_back();
      for (int e = 0; e < n_expert; ++e) {
        if (c[e] > 0) g.push_back(l * n_expert + e);
      }
    }
  }
  return groups;
}

std::vector<int> demand_sequence(const Trace& t) {
  std::vector<int> seq;
  for (const auto& g : demand_groups(t)) seq.insert(seq.end(), g.begin(), g.end());
  return seq;
}

std::vector<std::string> simulated_policy_names() {
  auto names = online_policy_names();
  names.push_back("belady");
  return names;
}

const char* scope_name(CacheScope s) {
  return s == CacheScope::PerLayer ? "per-layer" : "global";
}

CacheSimResult simulate_cache(const Trace& t, const std::string& policy, CacheScope scope, int capacity,
                              double lfu_decay) {
  const int n_moe = t.info.n_moe(), n_expert = t.info.n_expert, n_units = n_moe * n_expert;
  std::unique_ptr<EvictionPolicy> p = policy == "belady" ? std::make_unique<BeladyPolicy>(n_units, demand_groups(t))
                                                         : make_policy(policy, n_units, lfu_decay);
  ExpertCache cache(n_moe, n_expert, scope, capacity, std::move(p));
  CacheSimResult r;
  r.policy = policy;
  r.scope = scope;
  r.capacity = capacity;
  r.layer_requests.assign(n_moe, 0);
  r.layer_misses.assign(n_moe, 0);
  std::vector<int> units;
  for (int64_t s = 0; s < t.n_steps(); ++s) {
    cache.begin_step();
    for (int l = 0; l < n_moe; ++l) {
      const uint32_t* c = t.step_layer(s, l);
      units.clear();
      for (int e = 0; e < n_expert; ++e) {
        if (c[e] > 0) units.push_back(l * n_expert + e);
      }
      r.layer_requests[l] += static_cast<int64_t>(units.size());
      r.layer_misses[l] += cache.serve_layer(units, [&](int u) { return c[u - l * n_expert]; });
    }
  }
  for (int l = 0; l < n_moe; ++l) {
    r.requests += r.layer_requests[l];
    r.misses += r.layer_misses[l];
  }
  return r;
}

MissCurve miss_curve(const Trace& t, CacheScope scope, double lfu_decay) {
  MissCurve m;
  m.scope = scope;
  const int n_expert = t.info.n_expert;
  const int points = std::min(n_expert, 32);
  for (int i = 1; i <= points; ++i) {
    const int c = std::max(1, (i * n_expert + points / 2) / points);
    if (m.per_layer.empty() || c != m.per_layer.back()) m.per_layer.push_back(c);
  }
  for (int c : m.per_layer) m.fraction.push_back(double(c) / n_expert);
  m.policies = simulated_policy_names();
  for (const auto& p : m.policies) {
    std::vector<CacheSimResult> row;
    for (int c : m.per_layer) {
      row.push_back(
          simulate_cache(t, p, scope, scope == CacheScope::PerLayer ? c : c * t.info.n_moe(), lfu_decay));
    }
    m.results.push_back(std::move(row));
  }
  return m;
}

}  // namespace sy
