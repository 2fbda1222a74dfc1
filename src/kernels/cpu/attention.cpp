#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dot.h"

namespace sy::cpu {

void attention(const float* q, int64_t q_ld, int64_t n_tokens, const int32_t* positions,
               const KvView& kv, const AttentionShape& s, float* out, int64_t out_ld,
               ThreadPool& pool, std::vector<float>& scores) {
  int32_t max_pos = 0;
  for (int64_t t = 0; t < n_tokens; ++t) max_pos = std::max(max_pos, positions[t]);
  const int64_t span = max_pos + 1;
  if (scores.size() < static_cast<size_t>(span * pool.size())) scores.resize(span * pool.size());
  const int group = s.n_head / s.n_head_kv;
  const DotKernels& k = dot_kernels();

  pool.parallel_for(n_tokens * s.n_head, [&](int64_t task, int thread) {
    const int64_t t = task / s.n_head;
    const int h = static_cast<int>(task % s.n_head);
    const int g = h / group;
    const int64_t n_ctx = positions[t] + 1;
    const float* qh = q + t * q_ld + static_cast<int64_t>(h) * s.head_dim_k;
    float* sc = scores.data() + static_cast<int64_t>(thread) * span;

    float max = -INFINITY;
    for (int64_t p = 0; p < n_ctx; ++p) {
      sc[p] = k.f32(qh, kv.k(p) + static_cast<int64_t>(g) * s.head_dim_k, s.head_dim_k) * s.scale;
      max = std::fmax(max, sc[p]);
    }
    double sum = 0.0;
    for (int64_t p = 0; p < n_ctx; ++p) {
      sc[p] = std::exp(sc[p] - max);
      sum += sc[p];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* o = out + t * out_ld + static_cast<int64_t>(h) * s.head_dim_v;
    std::fill(o, o + s.head_dim_v, 0.0f);
    for (int64_t p = 0; p < n_ctx; ++p) {
      const float w = sc[p] * inv;
      k.axpy(w, kv.v(p) + static_cast<int64_t>(g) * s.head_dim_v, o, s.head_dim_v);
    }
  });
}

}  // namespace sy::cpu
