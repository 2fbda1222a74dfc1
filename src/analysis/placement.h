// Expert placement over D devices (expert parallelism), per MoE layer, as in "Towards
// MoE Deployment" (Fig. 14): each device holds at most ceil(n_expert / D) experts of a
// layer, and a device's load in a step is the tokens routed to its experts.
//   contiguous       experts [0, s) on device 0, [s, 2s) on device 1, ... (s = ceil(E/D))
//   greedy           the paper's balancing: experts by descending mean load, each onto the
//                    least-loaded device that has a free slot
//   anti-correlation also keeps experts that are active together apart: greedy then
//                    pairwise swaps minimising sum_d E[load_d^2] (mean load and co-activation)
// Placements are fitted on one range of steps and evaluated on another.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/trace.h"

namespace sy {

enum class PlacementMethod { Contiguous, Greedy, AntiCorrelation };
const char* placement_name(PlacementMethod m);
constexpr PlacementMethod kPlacementMethods[] = {PlacementMethod::Contiguous, PlacementMethod::Greedy,
                                                 PlacementMethod::AntiCorrelation};

// Per expert, its device (0..n_dev-1). Fitted on steps [begin, end) of one MoE layer.
std::vector<int> place_experts(const Trace& t, int moe_layer, int n_dev, PlacementMethod m, int64_t begin,
                               int64_t end);

// Tokens per step, over steps [begin, end) of one MoE layer:
//   max_load      max over devices of the device's mean load (the static imbalance)
//   avg_max_load  mean over steps of that step's busiest device (what a step waits for)
//   ideal         mean tokens per step / D (perfect balance)
struct LoadMetrics {
  double max_load = 0, avg_max_load = 0, ideal = 0;
};
LoadMetrics placement_load(const Trace& t, int moe_layer, const std::vector<int>& device, int n_dev,
                           int64_t begin, int64_t end);

// One method on D devices: metrics averaged over MoE layers, on the fitting half (the
// first half of the steps) and on the held-out second half.
struct PlacementResult {
  PlacementMethod method = PlacementMethod::Contiguous;
  int n_dev = 0;
  LoadMetrics fit, held_out;
  std::vector<std::vector<int>> device;  // [moe_layer][expert]
};
std::vector<PlacementResult> placement_study(const Trace& t, int n_dev);

}  // namespace sy
