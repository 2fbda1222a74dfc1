#include "moe/router.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/cpu/ops.h"

namespace sy {

void route(const float* logits, int64_t ld, int64_t n_tokens, const RouterRules& rules, Routing& out) {
  const int n = rules.n_expert, k = rules.k;
  if (k <= 0 || k > n || n > kMaxRouterExperts) throw Error("router: top-k " + std::to_string(k) + " of " + std::to_string(n) + " experts is invalid");
  out.n_tokens = n_tokens;
  out.k = k;
  out.expert.resize(static_cast<size_t>(n_tokens * k));
  out.weight.resize(static_cast<size_t>(n_tokens * k));
  float probs[kMaxRouterExperts];
  int32_t order[kMaxRouterExperts];
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::copy(logits + t * ld, logits + t * ld + n, probs);
    cpu::softmax(probs, n);
    for (int e = 0; e < n; ++e) order[e] = e;
    std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
      return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    });
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += probs[order[j]];
    // Clamp as llama.cpp does, so an all-zero selection cannot divide by zero.
    const float norm = rules.renormalize ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;
    for (int j = 0; j < k; ++j) {
      out.expert[t * k + j] = order[j];
      out.weight[t * k + j] = probs[order[j]] * norm * rules.scale;
    }
  }
}

}  // namespace sy
