// Receives every MoE layer's routing decision as it happens: traces, metrics, cache
// policies and predictive prefetch hook in here without the MoE layer knowing them.
#pragma once

#include "moe/dispatch_plan.h"

namespace sy {

class RoutingObserver {
 public:
  virtual ~RoutingObserver() = default;
  // Called once per MoE layer per forward step, after routing and before the experts run.
  // plan.rows(e) is expert e's token count in this step.
  virtual void on_routing(int layer, const Routing& routing, const DispatchPlan& plan) = 0;
  // Called once at the end of each forward step.
  virtual void on_step_end() {}
  // True when every layer must route every token of the step (a trace whose layers all
  // count the same tokens); false lets the last layer skip tokens whose logits nobody wants.
  virtual bool needs_every_token() const { return false; }
};

}  // namespace sy
