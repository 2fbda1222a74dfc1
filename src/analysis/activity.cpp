#include "analysis/activity.h"

#include <algorithm>
#include <map>

namespace sy {
namespace {

LayerActivity layer_activity(const Trace& t, int l) {
  const int E = t.info.n_expert;
  const int64_t S = t.n_steps();
  LayerActivity a;
  a.layer = t.info.moe_layers[l];
  std::vector<double> tokens(E, 0.0), active_steps(E, 0.0);
  std::map<std::vector<bool>, int64_t> set_freq;
  double total_tokens = 0, reused = 0, used_before_next = 0, same_set = 0;
  a.inactive_min = 1.0;
  std::vector<bool> prev, cur(E);
  for (int64_t s = 0; s < S; ++s) {
    const uint32_t* c = t.step_layer(s, l);
    int active = 0;
    for (int e = 0; e < E; ++e) {
      cur[e] = c[e] > 0;
      active += cur[e];
      tokens[e] += c[e];
      active_steps[e] += cur[e];
    }
    total_tokens += t.tokens[s];
    const double idle = 1.0 - double(active) / E;
    a.inactive_mean += idle;
    a.inactive_min = std::min(a.inactive_min, idle);
    a.inactive_max = std::max(a.inactive_max, idle);
    a.mean_active += active;
    ++set_freq[cur];
    if (s > 0) {
      for (int e = 0; e < E; ++e) {
        used_before_next += prev[e];
        reused += prev[e] && cur[e];
      }
      same_set += prev == cur;
    }
    prev = cur;
  }
  if (S == 0) return a;
  a.inactive_mean /= double(S);
  a.mean_active /= double(S);
  a.token_fraction.resize(E);
  double max_tokens = 0, sum_tokens = 0;
  for (int e = 0; e < E; ++e) {
    a.token_fraction[e] = total_tokens > 0 ? tokens[e] / total_tokens : 0.0;
    max_tokens = std::max(max_tokens, tokens[e]);
    sum_tokens += tokens[e];
  }
  a.load_max_over_mean = sum_tokens > 0 ? max_tokens / (sum_tokens / E) : 0.0;
  if (S > 1) {
    a.reuse_next_step = used_before_next > 0 ? reused / used_before_next : 0.0;
    a.same_set_next_step = same_set / double(S - 1);
  }
  double p2 = 0, p1 = 0;
  for (int e = 0; e < E; ++e) {
    const double p = active_steps[e] / double(S);
    p1 += p;
    p2 += p * p;
  }
  a.reuse_if_independent = p1 > 0 ? p2 / p1 : 0.0;
  for (const auto& [set, n] : set_freq) a.same_set_if_independent += (double(n) / S) * (double(n) / S);
  return a;
}

}  // namespace

ActivityStats activity_stats(const Trace& t) {
  ActivityStats st;
  const int L = t.info.n_moe(), E = t.info.n_expert;
  for (int l = 0; l < L; ++l) st.layers.push_back(layer_activity(t, l));
  st.inactive_per_step.resize(t.n_steps());
  double tokens = 0;
  for (int64_t s = 0; s < t.n_steps(); ++s) {
    int64_t idle = 0;
    for (int l = 0; l < L; ++l) {
      const uint32_t* c = t.step_layer(s, l);
      for (int e = 0; e < E; ++e) idle += c[e] == 0;
    }
    st.inactive_per_step[s] = double(idle) / (double(L) * E);
    st.inactive_mean += st.inactive_per_step[s];
    tokens += t.tokens[s];
  }
  if (t.n_steps() > 0) {
    st.inactive_mean /= double(t.n_steps());
    st.mean_tokens_per_step = tokens / double(t.n_steps());
  }
  for (const auto& a : st.layers) {
    st.reuse_next_step += a.reuse_next_step / L;
    st.reuse_if_independent += a.reuse_if_independent / L;
  }
  return st;
}

HeatmapData layer_heatmap(const Trace& t, int moe_layer, int max_cols) {
  HeatmapData h;
  h.n_expert = t.info.n_expert;
  const int64_t S = t.n_steps();
  h.steps_per_col = std::max<int64_t>(1, (S + max_cols - 1) / std::max(1, max_cols));
  h.n_cols = static_cast<int>((S + h.steps_per_col - 1) / h.steps_per_col);
  h.value.assign(size_t(h.n_expert) * h.n_cols, 0.0);
  std::vector<double> col_tokens(h.n_cols, 0.0);
  for (int64_t s = 0; s < S; ++s) {
    const int col = static_cast<int>(s / h.steps_per_col);
    const uint32_t* c = t.step_layer(s, moe_layer);
    for (int e = 0; e < h.n_expert; ++e) h.value[size_t(e) * h.n_cols + col] += c[e];
    col_tokens[col] += t.tokens[s];
  }
  for (int e = 0; e < h.n_expert; ++e) {
    for (int col = 0; col < h.n_cols; ++col) {
      double& v = h.value[size_t(e) * h.n_cols + col];
      v = col_tokens[col] > 0 ? v / col_tokens[col] : 0.0;
      h.vmax = std::max(h.vmax, v);
    }
  }
  return h;
}

}  // namespace sy
