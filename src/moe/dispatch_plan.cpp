#include "moe/dispatch_plan.h"

#include <cmath>

#include "base/error.h"

namespace sy {
namespace {

void reset(const Routing& r, int n_expert, DispatchPlan& plan) {
  plan.n_expert = n_expert;
  plan.k = r.k;
  plan.n_tokens = r.n_tokens;
  plan.offset.assign(n_expert + 1, 0);
  plan.slot.assign(static_cast<size_t>(r.n_tokens * r.k), -1);
  plan.weight = r.weight;
  plan.active.clear();
  for (int32_t e : r.expert) {
    if (e < 0 || e >= n_expert) throw Error("dispatch: expert id " + std::to_string(e) + " out of range");
  }
}

}  // namespace

int64_t DispatchPlan::n_dropped() const {
  int64_t n = 0;
  for (int64_t s : slot) n += s < 0;
  return n;
}

void build_dynamic_plan(const Routing& r, int n_expert, DispatchPlan& plan) {
  reset(r, n_expert, plan);
  const int64_t n_pairs = r.n_tokens * r.k;
  // Counting sort: histogram, exclusive prefix sum, then place each pair. Pairs of one
  // expert keep token order, so the gathered blocks are deterministic.
  for (int64_t i = 0; i < n_pairs; ++i) ++plan.offset[r.expert[i] + 1];
  for (int e = 0; e < n_expert; ++e) plan.offset[e + 1] += plan.offset[e];
  plan.row_token.assign(static_cast<size_t>(n_pairs), -1);
  // offset[e] is expert e's cursor while placing (it ends at e + 1's start); shifting the
  // array back up restores the starts, so the hot path needs no scratch vector.
  for (int64_t i = 0; i < n_pairs; ++i) {
    const int64_t row = plan.offset[r.expert[i]]++;
    plan.row_token[row] = static_cast<int32_t>(i / r.k);
    plan.slot[i] = row;
  }
  for (int e = n_expert; e > 0; --e) plan.offset[e] = plan.offset[e - 1];
  plan.offset[0] = 0;
  for (int e = 0; e < n_expert; ++e) {
    if (plan.rows(e) > 0) plan.active.push_back(e);
  }
}

int64_t static_capacity(int64_t n_tokens, int k, int n_expert, double capacity_factor) {
  if (!(capacity_factor > 0)) throw Error("--capacity-factor must be positive");
  const double c = std::ceil(capacity_factor * static_cast<double>(n_tokens * k) / n_expert);
  return std::max<int64_t>(1, static_cast<int64_t>(c));
}

void build_static_plan(const Routing& r, int n_expert, double capacity_factor, DispatchPlan& plan) {
  reset(r, n_expert, plan);
  const int64_t cap = static_capacity(r.n_tokens, r.k, n_expert, capacity_factor);
  for (int e = 0; e <= n_expert; ++e) plan.offset[e] = cap * e;
  plan.row_token.assign(static_cast<size_t>(cap * n_expert), -1);
  std::vector<int64_t> fill(n_expert, 0);
  for (int j = 0; j < r.k; ++j) {
    for (int64_t t = 0; t < r.n_tokens; ++t) {
      const int64_t i = t * r.k + j;
      const int e = r.expert[i];
      if (fill[e] == cap) continue;  // over capacity: dropped
      const int64_t row = plan.offset[e] + fill[e]++;
      plan.row_token[row] = static_cast<int32_t>(t);
      plan.slot[i] = row;
    }
  }
  // Static gating computes every expert's full block, padding included.
  for (int e = 0; e < n_expert; ++e) plan.active.push_back(e);
}

}  // namespace sy
