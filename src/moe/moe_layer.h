// The MoE block: route, plan, gather each expert's tokens into one contiguous block, run
// each active expert once over its block, then scale by the gate weights and scatter-add
// back to token order (dynamic gating). Static gating is the GShard baseline: every
// expert runs on its full capacity block, padding included, and tokens move through
// dense one-hot dispatch/combine einsums (moe/dense_dispatch.h).
#pragma once

#include <cstdint>
#include <vector>

#include "experts/expert_store.h"
#include "kernels/backend.h"
#include "moe/dense_dispatch.h"
#include "moe/dispatch_plan.h"
#include "moe/expert_exchange.h"
#include "moe/routing_observer.h"
#include "parallel/communicator.h"

namespace sy {

enum class GatingMode { Dynamic, Static };

struct MoeOptions {
  GatingMode gating = GatingMode::Dynamic;
  double capacity_factor = 1.0;  // static gating only
  RoutingObserver* observer = nullptr;  // not owned; may be null
  // Expert parallelism: with more than one rank, experts are split over the ranks and each
  // rank's tokens visit the experts' owners (moe/expert_exchange.h). Every rank must run
  // every step, with at least one token, since each MoE layer is a collective. Not owned;
  // null or one rank: every expert runs here.
  Communicator* comm = nullptr;
  bool expert_parallel() const { return comm && comm->size() > 1; }
};

// What one MoE layer call did, for traces and benchmarks.
struct MoeStepStats {
  int64_t tokens = 0;
  int64_t active_experts = 0;
  int64_t rows_computed = 0;  // including static-gating padding
  int64_t dropped = 0;
  size_t expert_bytes_read = 0;
};

// Later MoE layers, for predictive prefetch: their routers applied to this layer's input
// guess which of their experts the step will need, so a tiered store can start loading
// them early (the nearest layer first: its guess is the most accurate).
struct NextLayerHint {
  const WeightMatrix* router = nullptr;
  int layer = -1;
};

class MoeLayer {
 public:
  // x: n token rows of n_embd (ld apart); out gets the block's output (not the residual).
  // The router and experts run on `backend`; `pool` runs the host-side work (the static
  // gating baseline's dense dispatch and combine).
  MoeStepStats forward(const float* x, int64_t n, int64_t ld, const WeightMatrix& router,
                       const RouterRules& rules, ExpertStore& store, int layer,
                       const MoeOptions& opt, float* out, int64_t out_ld, Backend& backend, ThreadPool& pool,
                       const std::vector<NextLayerHint>& next = {});

  // Routes x (n rows, ld apart) with a later layer's router and has the store start loading
  // the experts that routing picks (predictive prefetch; no effect on a resident store).
  void prefetch(const float* x, int64_t n, int64_t ld, const NextLayerHint& hint, const RouterRules& rules,
                ExpertStore& store, Backend& backend);

  const Routing& last_routing() const { return routing_; }
  const DispatchPlan& last_plan() const { return plan_; }

 private:
  template <class AfterPlan>
  void run_experts(ExpertStore& store, int layer, const std::vector<int32_t>& active,
                   const std::vector<int64_t>& offsets, cpu::Rows in, cpu::OutRows out, Backend& backend,
                   MoeStepStats& stats, AfterPlan&& after_plan);

  Routing routing_, predicted_;
  DispatchPlan plan_, predicted_plan_;
  std::vector<float> logits_, gathered_, expert_out_, local_out_;
  ExpertExchange exchange_;
  DenseDispatch dense_;
  std::vector<FfnJob> jobs_;
  std::vector<std::vector<int32_t>> groups_;
  std::vector<int64_t> active_tokens_;  // tokens of each expert in plan_.active
};

}  // namespace sy
