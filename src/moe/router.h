// Gating: router logits -> softmax over all experts -> top-k -> the selected weights,
// renormalised and/or scaled as the model family defines.
#pragma once

#include <cstdint>
#include <vector>

namespace sy {

// The most experts a layer may have: top-k runs on stack arrays this long.
constexpr int kMaxRouterExperts = 4096;

struct RouterRules {
  int n_expert = 0;
  int k = 0;
  bool renormalize = false;  // weights /= sum of the k selected probabilities
  float scale = 1.0f;        // weights *= scale (1 = none)
};

// The routing decision for a batch: token t's j-th choice is expert[t*k + j] with
// weight[t*k + j], choices ordered by decreasing probability (ties: lower expert id).
struct Routing {
  int64_t n_tokens = 0;
  int k = 0;
  std::vector<int32_t> expert;
  std::vector<float> weight;
};

// logits: n_tokens rows of n_expert values (ld floats apart). Overwrites `out`.
void route(const float* logits, int64_t ld, int64_t n_tokens, const RouterRules& rules, Routing& out);

}  // namespace sy
