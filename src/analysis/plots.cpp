// The SVG figures of an analysis report.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/report.h"
#include "analysis/svg.h"
#include "base/whole_file.h"

namespace sy {
namespace {

std::string policy_label(const std::string& p) {
  if (p == "belady") return "Belady's MIN";
  if (p == "expert-buffering") return "Expert Buffering";
  if (p == "lfu-decay") return "LFU (decay)";
  if (p == "lru") return "LRU";
  if (p == "eb-lfu") return "EB + LFU";
  return p;
}

std::string trace_line(const AnalysisResult& r) {
  const Trace& t = *r.trace;
  char tokens[32];
  std::snprintf(tokens, sizeof tokens, "%.1f", r.activity.mean_tokens_per_step);
  return t.info.model_name + ": " + std::to_string(t.n_steps()) + " steps, " + tokens +
         " tokens per step on average, " + std::to_string(t.info.n_expert) + " experts, top-" +
         std::to_string(t.info.top_k);
}

std::string heatmap_svg(const AnalysisResult& r, int l) {
  const Trace& t = *r.trace;
  const HeatmapData d = layer_heatmap(t, l, r.options.heatmap_columns);
  svg::Heatmap h;
  h.title = "Expert activation, layer " + std::to_string(t.info.moe_layers[l]);
  h.subtitle = trace_line(r) +
               (d.steps_per_col > 1 ? "; " + std::to_string(d.steps_per_col) + " steps per column" : "");
  h.x_label = "forward step";
  h.y_label = "expert";
  h.legend_label = "share of the step's tokens routed to the expert";
  h.rows = d.n_expert;
  h.cols = d.n_cols;
  h.value = d.value;
  h.vmax = d.vmax > 0 ? d.vmax : 1.0;
  h.x_min = 0;
  h.x_max = static_cast<double>(d.n_cols * d.steps_per_col);
  for (int e = 0; e < d.n_expert; ++e) h.row_labels.push_back(std::to_string(e));
  return svg::heatmap(h);
}

std::string inactive_svg(const AnalysisResult& r) {
  const Trace& t = *r.trace;
  const int64_t S = t.n_steps();
  const int64_t per = std::max<int64_t>(1, (S + 199) / 200);
  svg::LinePlot p;
  p.title = "Idle experts per step";
  p.subtitle = trace_line(r) + (per > 1 ? "; mean of " + std::to_string(per) + " steps per point" : "");
  p.x_label = "forward step";
  p.y_label = "experts with no token (fraction of the layer's experts)";
  p.y_percent = true;
  p.x_max = static_cast<double>(std::max<int64_t>(S, 1));
  p.y_max = 1.0;
  for (int l = 0; l <= t.info.n_moe(); ++l) {
    svg::Series s;
    const bool all = l == t.info.n_moe();
    s.name = all ? "all layers" : "layer " + std::to_string(t.info.moe_layers[l]);
    s.colour = all ? "#000000" : svg::colour(l);
    s.dashed = all;
    s.markers = false;
    for (int64_t s0 = 0; s0 < S; s0 += per) {
      const int64_t s1 = std::min(S, s0 + per);
      double sum = 0;
      for (int64_t st = s0; st < s1; ++st) {
        if (all) {
          sum += r.activity.inactive_per_step[st];
        } else {
          const uint32_t* c = t.step_layer(st, l);
          int idle = 0;
          for (int e = 0; e < t.info.n_expert; ++e) idle += c[e] == 0;
          sum += double(idle) / t.info.n_expert;
        }
      }
      s.x.push_back(0.5 * double(s0 + s1));
      s.y.push_back(sum / double(s1 - s0));
    }
    if (t.info.n_moe() > 8 && !all) continue;  // many layers: keep the plot legible
    p.series.push_back(std::move(s));
  }
  return svg::line_plot(p);
}

std::string miss_curve_svg(const AnalysisResult& r, const MissCurve& m) {
  const Trace& t = *r.trace;
  svg::LinePlot p;
  const bool per_layer = m.scope == CacheScope::PerLayer;
  p.title = std::string("Cache miss rate vs cache size (") +
            (per_layer ? "one cache per layer" : "one cache for all layers") + ")";
  p.subtitle = trace_line(r);
  p.x_label = per_layer ? "cache size (experts per layer, as a fraction of the layer's " +
                              std::to_string(t.info.n_expert) + ")"
                        : "cache size (fraction of all " + std::to_string(t.info.n_expert * t.info.n_moe()) +
                              " experts)";
  p.y_label = "miss rate (misses / expert requests)";
  p.x_percent = p.y_percent = true;
  p.x_min = 0;
  p.x_max = 1;
  double ymax = 0;
  for (size_t i = 0; i < m.policies.size(); ++i) {
    svg::Series s;
    s.name = policy_label(m.policies[i]);
    s.colour = m.policies[i] == "belady" ? "#000000" : svg::colour(static_cast<int>(i));
    s.dashed = m.policies[i] == "belady";
    s.x = m.fraction;
    for (const auto& res : m.results[i]) {
      s.y.push_back(res.miss_rate());
      ymax = std::max(ymax, res.miss_rate());
    }
    p.series.push_back(std::move(s));
  }
  p.y_max = ymax > 0 ? std::min(1.0, std::ceil(ymax * 10.0 + 0.5) / 10.0) : 1.0;
  return svg::line_plot(p);
}

std::string locality_svg(const AnalysisResult& r) {
  svg::BarChart b;
  b.title = "Temporal locality: P(expert used at step t is used at step t+1)";
  b.subtitle = trace_line(r);
  b.series = {"observed", "if steps were independent"};
  b.colours = {svg::colour(0), "#aaaaaa"};
  svg::BarPanel p;
  p.title = "per MoE layer";
  p.y_label = "probability";
  for (const auto& a : r.activity.layers) {
    p.groups.push_back("layer " + std::to_string(a.layer));
    p.values.push_back({a.reuse_next_step, a.reuse_if_independent});
  }
  b.panels.push_back(std::move(p));
  return svg::bar_chart(b);
}

std::string placement_svg(const AnalysisResult& r) {
  svg::BarChart b;
  b.title = "Expert placement balance on the held-out half of the trace";
  b.subtitle = trace_line(r) + "; placements fitted on the first half";
  b.colours = {svg::colour(0), svg::colour(1), svg::colour(2)};
  for (PlacementMethod m : kPlacementMethods) b.series.push_back(placement_name(m));
  b.reference = 1.0;
  b.reference_label = "perfect balance";
  svg::BarPanel max_load, avg_max;
  max_load.title = "Max Load";
  avg_max.title = "Avg Max Load";
  max_load.y_label = avg_max.y_label = "load / perfectly balanced load";
  for (const auto& study : r.placement) {
    const std::string g = std::to_string(study[0].n_dev) + " devices";
    max_load.groups.push_back(g);
    avg_max.groups.push_back(g);
    std::vector<double> a, b2;
    for (const auto& res : study) {
      const double ideal = res.held_out.ideal > 0 ? res.held_out.ideal : 1.0;
      a.push_back(res.held_out.max_load / ideal);
      b2.push_back(res.held_out.avg_max_load / ideal);
    }
    max_load.values.push_back(a);
    avg_max.values.push_back(b2);
  }
  b.panels = {max_load, avg_max};
  return svg::bar_chart(b);
}

}  // namespace

std::vector<std::string> write_plots(const AnalysisResult& r, const std::string& dir) {
  std::vector<std::string> files;
  auto put = [&](const std::string& name, const std::string& text) {
    write_whole_file(dir + "/" + name, text);
    files.push_back(name);
  };
  for (int l = 0; l < r.trace->info.n_moe(); ++l) {
    put("heatmap_layer" + std::to_string(r.trace->info.moe_layers[l]) + ".svg", heatmap_svg(r, l));
  }
  put("idle_experts.svg", inactive_svg(r));
  put("locality.svg", locality_svg(r));
  put("miss_rate_per_layer.svg", miss_curve_svg(r, r.per_layer));
  put("miss_rate_global.svg", miss_curve_svg(r, r.global));
  if (!r.placement.empty()) put("placement.svg", placement_svg(r));
  return files;
}

}  // namespace sy
