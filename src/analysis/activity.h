// Per-layer activation statistics of a trace: expert load, inactive experts per step and
// temporal locality between consecutive steps.
#pragma once

#include <cstdint>
#include <vector>

#include "experts/trace.h"

namespace sy {

struct LayerActivity {
  int layer = 0;                       // model layer index
  std::vector<double> token_fraction;  // per expert: its tokens / all tokens (sums to top_k)
  double load_max_over_mean = 0;       // busiest expert's tokens / the mean expert's
  double mean_active = 0;              // experts with tokens, mean over steps
  double inactive_mean = 0, inactive_min = 0, inactive_max = 0;  // fraction of experts idle per step
  // Temporal locality: P(an expert used at step t is used at step t+1), and the same if
  // each step's set were drawn independently from the per-step activation frequencies
  // (sum_e p_e^2 / sum_e p_e, p_e = P(e active in a step)).
  double reuse_next_step = 0, reuse_if_independent = 0;
  double same_set_next_step = 0, same_set_if_independent = 0;  // P(set at t+1 == set at t)
};

struct ActivityStats {
  std::vector<LayerActivity> layers;
  std::vector<double> inactive_per_step;  // fraction of all MoE-layer experts idle, per step
  double inactive_mean = 0, reuse_next_step = 0, reuse_if_independent = 0, mean_tokens_per_step = 0;
};

ActivityStats activity_stats(const Trace& t);

// Heatmap data for one MoE layer: [expert][column] = share of a column's tokens routed to
// the expert (count / tokens, in [0, 1]), steps grouped into at most max_cols columns of
// equal width. first_step[c] is each column's first step.
struct HeatmapData {
  int n_expert = 0, n_cols = 0;
  int64_t steps_per_col = 1;
  std::vector<double> value;  // n_expert * n_cols, row-major by expert
  double vmax = 0;
};
HeatmapData layer_heatmap(const Trace& t, int moe_layer, int max_cols);

}  // namespace sy
