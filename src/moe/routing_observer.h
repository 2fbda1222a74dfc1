// Receives every MoE layer's routing decision as it happens: traces, metrics, cache
// policies and predictive prefetch hook in here without the MoE layer knowing them.
#pragma once

#include <utility>
#include <vector>

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

// Hands every call to each of several observers, in order (a server's expert metrics and an
// expert trace on the same steps). The observers are not owned.
class RoutingObservers final : public RoutingObserver {
 public:
  explicit RoutingObservers(std::vector<RoutingObserver*> each) : each_(std::move(each)) {}
  void on_routing(int layer, const Routing& routing, const DispatchPlan& plan) override {
    for (RoutingObserver* o : each_) o->on_routing(layer, routing, plan);
  }
  void on_step_end() override {
    for (RoutingObserver* o : each_) o->on_step_end();
  }
  bool needs_every_token() const override {
    for (const RoutingObserver* o : each_) {
      if (o->needs_every_token()) return true;
    }
    return false;
  }

 private:
  std::vector<RoutingObserver*> each_;
};

}  // namespace sy
