#include "moe/dense_dispatch.h"

#include <algorithm>

#include "kernels/cpu/dot.h"

namespace sy {

void DenseDispatch::build(const DispatchPlan& plan) {
  tokens_ = plan.n_tokens;
  slots_ = plan.n_rows();
  dispatch_.assign(static_cast<size_t>(tokens_ * slots_), 0.0f);
  combine_.assign(static_cast<size_t>(tokens_ * slots_), 0.0f);
  for (int64_t t = 0; t < tokens_; ++t) {
    for (int j = 0; j < plan.k; ++j) {
      const int64_t slot = plan.slot[t * plan.k + j];
      if (slot < 0) continue;  // dropped: the token keeps only its residual for this choice
      dispatch_[t * slots_ + slot] = 1.0f;
      combine_[t * slots_ + slot] = plan.weight[t * plan.k + j];
    }
  }
}

void DenseDispatch::dispatch(const float* x, int64_t ld, int64_t d, float* gathered, ThreadPool& pool) const {
  const auto& k = cpu::dot_kernels();
  pool.parallel_for(slots_, [&](int64_t slot, int) {
    float* o = gathered + slot * d;
    std::fill(o, o + d, 0.0f);
    for (int64_t t = 0; t < tokens_; ++t) k.axpy(dispatch_[t * slots_ + slot], x + t * ld, o, d);
  });
}

void DenseDispatch::combine(const float* expert_out, int64_t d, float* out, int64_t ld_out, ThreadPool& pool) const {
  const auto& k = cpu::dot_kernels();
  pool.parallel_for(tokens_, [&](int64_t t, int) {
    float* o = out + t * ld_out;
    std::fill(o, o + d, 0.0f);
    for (int64_t slot = 0; slot < slots_; ++slot) k.axpy(combine_[t * slots_ + slot], expert_out + slot * d, o, d);
  });
}

}  // namespace sy
