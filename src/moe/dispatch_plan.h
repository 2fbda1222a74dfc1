// The token-to-expert mapping that the MoE layer executes.
//
// Dynamic gating (DeepSpeed-MoE, "Towards MoE Deployment"): a counting sort of the
// (token, choice) pairs by expert gives each expert one contiguous block holding exactly
// the tokens routed to it: no one-hot masks, no capacity padding, no dropped tokens, and
// an expert that got no token has an empty block and is never read.
//
// Static gating (GShard / Switch, the baseline): every expert gets a fixed block of
// `capacity` slots; assignments beyond an expert's capacity are dropped (the token keeps
// only its residual path for that choice) and unused slots are padding that is still
// computed.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/router.h"

namespace sy {

struct DispatchPlan {
  int n_expert = 0;
  int k = 0;
  int64_t n_tokens = 0;
  // Rows of expert e are [offset[e], offset[e+1]) in the gathered order.
  std::vector<int64_t> offset;
  // Per gathered row: the source token, or -1 for a padding slot (static gating only).
  std::vector<int32_t> row_token;
  // Per (token, choice) = t*k + j: the gathered row holding it, or -1 if dropped.
  std::vector<int64_t> slot;
  // Gate weights per (token, choice), copied from the routing.
  std::vector<float> weight;
  // Experts with at least one row, ascending.
  std::vector<int32_t> active;

  int64_t rows(int e) const { return offset[e + 1] - offset[e]; }
  int64_t n_rows() const { return offset.empty() ? 0 : offset.back(); }
  int64_t n_dropped() const;
};

void build_dynamic_plan(const Routing& r, int n_expert, DispatchPlan& plan);

// capacity = ceil(capacity_factor * n_tokens * k / n_expert), at least 1. Assignments
// are admitted by choice rank first (every token's first choice before any second choice),
// then token order, as GShard does.
void build_static_plan(const Routing& r, int n_expert, double capacity_factor, DispatchPlan& plan);
int64_t static_capacity(int64_t n_tokens, int k, int n_expert, double capacity_factor);

}  // namespace sy
