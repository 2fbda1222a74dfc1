// Small traces built by hand or at random for the analysis tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "experts/trace.h"

namespace sy::test {

inline TraceInfo small_info(int n_moe, int n_expert, int top_k) {
  TraceInfo info;
  info.model_name = "test-model";
  info.n_layer = n_moe;
  info.n_expert = n_expert;
  info.top_k = top_k;
  for (int l = 0; l < n_moe; ++l) info.moe_layers.push_back(l);
  return info;
}

// A top-1 trace whose step s uses, in MoE layer l, exactly the experts sets[s][l] (one
// token each): the demand sets of the cache-policy examples.
inline Trace trace_of_layered_sets(int n_expert, const std::vector<std::vector<std::vector<int>>>& sets) {
  Trace t;
  t.info = small_info(static_cast<int>(sets.at(0).size()), n_expert, 1);
  for (const auto& step : sets) {
    std::vector<uint32_t> counts(step.size() * n_expert, 0);
    uint32_t tokens = static_cast<uint32_t>(step[0].size());
    for (size_t l = 0; l < step.size(); ++l) {
      for (int e : step[l]) counts[l * n_expert + e] = 1;
    }
    t.add_step(tokens, counts);
  }
  return t;
}

// One layer, one expert set per step.
inline Trace trace_of_sets(int n_expert, const std::vector<std::vector<int>>& sets) {
  std::vector<std::vector<std::vector<int>>> s;
  for (const auto& x : sets) s.push_back({x});
  return trace_of_layered_sets(n_expert, s);
}

// Random routing with skewed expert popularity and some stickiness from step to step,
// so that caches and placements have something to find.
inline Trace random_trace(uint32_t seed, int n_moe, int n_expert, int top_k, int64_t n_steps,
                          int max_tokens) {
  std::mt19937 rng(seed);
  Trace t;
  t.info = small_info(n_moe, n_expert, top_k);
  std::vector<std::vector<double>> weight(n_moe, std::vector<double>(n_expert));
  for (auto& w : weight) {
    for (double& x : w) x = std::pow(std::uniform_real_distribution<double>(0.05, 1.0)(rng), 3.0);
  }
  std::vector<std::vector<int>> last(n_moe);
  for (int64_t s = 0; s < n_steps; ++s) {
    const uint32_t tokens = std::uniform_int_distribution<uint32_t>(1, max_tokens)(rng);
    std::vector<uint32_t> counts(size_t(n_moe) * n_expert, 0);
    for (int l = 0; l < n_moe; ++l) {
      std::vector<int> chosen;
      for (uint32_t tok = 0; tok < tokens; ++tok) {
        std::vector<double> w = weight[l];
        chosen.clear();
        for (int j = 0; j < top_k; ++j) {
          int e;
          if (!last[l].empty() && std::uniform_real_distribution<double>()(rng) < 0.3) {
            e = last[l][std::uniform_int_distribution<size_t>(0, last[l].size() - 1)(rng)];
            if (w[e] == 0) e = static_cast<int>(std::discrete_distribution<int>(w.begin(), w.end())(rng));
          } else {
            e = static_cast<int>(std::discrete_distribution<int>(w.begin(), w.end())(rng));
          }
          w[e] = 0;  // top-k experts of a token are distinct
          chosen.push_back(e);
          ++counts[size_t(l) * n_expert + e];
        }
      }
      last[l] = chosen;
    }
    t.add_step(tokens, counts);
  }
  return t;
}

}  // namespace sy::test
