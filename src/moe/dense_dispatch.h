// The GShard / Switch baseline's data movement: one-hot dispatch and combine tensors of
// shape [tokens, experts, capacity] applied as dense einsums,
//   dispatched[e, c, :] = sum_s dispatch[s, e, c] * x[s, :]
//   y[s, :]             = sum_{e, c} combine[s, e, c] * expert_out[e, c, :]
// with every product computed, zeros included, as those implementations do. Dynamic
// gating replaces both with an index gather and scatter; `--moe-gating static` keeps
// this path so the benchmark can show the papers' comparison.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "moe/dispatch_plan.h"

namespace sy {

class DenseDispatch {
 public:
  // Builds the one-hot tensors of a static plan (every expert has the same capacity).
  void build(const DispatchPlan& plan);
  // gathered: plan.n_rows() rows of d floats.
  void dispatch(const float* x, int64_t ld, int64_t d, float* gathered, ThreadPool& pool) const;
  // out: n_tokens rows of d floats (ld_out apart), overwritten.
  void combine(const float* expert_out, int64_t d, float* out, int64_t ld_out, ThreadPool& pool) const;

 private:
  int64_t tokens_ = 0, slots_ = 0;           // slots = experts * capacity
  std::vector<float> dispatch_, combine_;    // [tokens x slots]
};

}  // namespace sy
