#include "moe/moe_layer.h"

#include "base/error.h"

namespace sy {

// Each active expert once over its whole block of `in` (rows [offsets[e], offsets[e + 1])),
// in grouped jobs: one unless the store has to load experts, then the resident ones run
// while the others load; experts without rows are never acquired. `after_plan` runs once
// the store has pinned the layer's experts (prefetch of later layers goes there).
template <class AfterPlan>
void MoeLayer::run_experts(ExpertStore& store, int layer, const std::vector<int32_t>& active,
                           const std::vector<int64_t>& offsets, cpu::Rows in, cpu::OutRows out, Backend& backend,
                           MoeStepStats& stats, AfterPlan&& after_plan) {
  store.plan_layer(layer, active, active_tokens_, groups_);
  size_t released = 0;  // groups done and released
  try {
    after_plan();
    for (; released < groups_.size(); ++released) {
      const auto& group = groups_[released];
      jobs_.clear();
      for (int32_t e : group) {
        const int64_t n_rows = offsets[e + 1] - offsets[e];
        jobs_.push_back({&store.acquire(layer, e), offsets[e], n_rows});
        stats.active_experts++;
        stats.rows_computed += n_rows;
        stats.expert_bytes_read += jobs_.back().w->bytes();
      }
      backend.ffn(jobs_, in, out);
      for (int32_t e : group) store.release(layer, e);
    }
  } catch (...) {
    // A failed read or kernel: unpin what the layer still holds, or its slots stay taken
    // for good (a server keeps going after a failed step).
    for (size_t g = released; g < groups_.size(); ++g) {
      for (int32_t e : groups_[g]) store.release(layer, e);
    }
    throw;
  }
}

void MoeLayer::prefetch(const float* x, int64_t n, int64_t ld, const NextLayerHint& hint, const RouterRules& rules,
                        ExpertStore& store, Backend& backend) {
  const int n_expert = rules.n_expert;
  logits_.resize(static_cast<size_t>(n * n_expert));
  backend.matmul(*hint.router, {x, n, ld}, {logits_.data(), n_expert});
  route(logits_.data(), n_expert, n, rules, predicted_);
  build_dynamic_plan(predicted_, n_expert, predicted_plan_);
  store.prefetch(hint.layer, predicted_plan_.active);
}

MoeStepStats MoeLayer::forward(const float* x, int64_t n, int64_t ld, const WeightMatrix& router,
                               const RouterRules& rules, ExpertStore& store, int layer,
                               const MoeOptions& opt, float* out, int64_t out_ld, Backend& backend, ThreadPool& pool,
                               const std::vector<NextLayerHint>& next) {
  const int64_t d = router.cols;
  const int n_expert = rules.n_expert;
  MoeStepStats stats;
  stats.tokens = n;

  logits_.resize(static_cast<size_t>(n * n_expert));
  backend.matmul(router, {x, n, ld}, {logits_.data(), n_expert});
  route(logits_.data(), n_expert, n, rules, routing_);
  if (opt.gating == GatingMode::Dynamic) {
    build_dynamic_plan(routing_, n_expert, plan_);
  } else {
    build_static_plan(routing_, n_expert, opt.capacity_factor, plan_);
  }

  if (opt.observer) opt.observer->on_routing(layer, routing_, plan_);

  const int64_t rows = plan_.n_rows();
  gathered_.resize(static_cast<size_t>(rows * d));
  expert_out_.resize(static_cast<size_t>(rows * d));
  const bool dense = opt.gating == GatingMode::Static;
  const bool expert_parallel = opt.expert_parallel();
  // The experts' input rows. A single token's experts all read its row in place (rows 0
  // floats apart) instead of k copies of it.
  cpu::Rows expert_in{gathered_.data(), rows, d};
  if (dense) {
    dense_.build(plan_);
    dense_.dispatch(x, ld, d, gathered_.data(), pool);
  } else if (n == 1 && !expert_parallel) {
    expert_in = {x, rows, 0};
  } else {
    // Gather: row r of the gathered block is its source token's row.
    backend.gather_rows(x, ld, plan_.row_token.data(), rows, d, gathered_.data());
  }

  if (expert_parallel) {
    // Expert parallelism: this rank runs its own experts over every rank's rows for them.
    if (dense) throw Error("expert parallelism needs dynamic gating (--moe-gating dynamic)");
    exchange_.dispatch(*opt.comm, plan_, gathered_.data(), d);
    active_tokens_.clear();
    for (int32_t e : exchange_.active()) active_tokens_.push_back(exchange_.rows(e));
    local_out_.resize(static_cast<size_t>(exchange_.n_rows() * d));
    run_experts(store, layer, exchange_.active(), exchange_.offsets(), {exchange_.local_rows(), exchange_.n_rows(), d},
                {local_out_.data(), d}, backend, stats, [] {});
    exchange_.combine(*opt.comm, local_out_.data(), expert_out_.data(), d);
  } else {
    // Tokens per active expert: its rows, less static gating's padding rows.
    active_tokens_.clear();
    for (int32_t e : plan_.active) {
      int64_t n_tok = plan_.rows(e);
      if (dense)
        for (int64_t r = plan_.offset[e]; r < plan_.offset[e + 1]; ++r) n_tok -= plan_.row_token[r] < 0;
      active_tokens_.push_back(n_tok);
    }
    run_experts(store, layer, plan_.active, plan_.offset, expert_in, {expert_out_.data(), d}, backend, stats, [&] {
      // After plan_layer pinned this layer's experts, so the prefetch cannot evict them.
      for (const NextLayerHint& h : next) prefetch(x, n, ld, h, rules, store, backend);
    });
  }

  if (dense) {
    dense_.combine(expert_out_.data(), d, out, out_ld, pool);
    stats.dropped = plan_.n_dropped();
    return stats;
  }
  // Scatter-add in choice order j = 0..k-1.
  backend.combine_rows(expert_out_.data(), plan_.slot.data(), plan_.weight.data(), n, plan_.k, d, out, out_ld);
  stats.dropped = plan_.n_dropped();
  return stats;
}

}  // namespace sy
