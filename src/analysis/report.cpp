#include "analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/svg.h"
#include "base/error.h"
#include "base/json_text.h"
#include "base/whole_file.h"

namespace sy {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string pct(double v) {
  return fmt("%.1f%%", 100.0 * v);
}

nlohmann::json curve_json(const MissCurve& m) {
  nlohmann::json j = {
      {"scope", scope_name(m.scope)}, {"experts_per_layer", m.per_layer}, {"fraction", m.fraction}};
  for (size_t i = 0; i < m.policies.size(); ++i) {
    std::vector<double> rates;
    for (const auto& r : m.results[i]) rates.push_back(r.miss_rate());
    j["miss_rate"][m.policies[i]] = rates;
  }
  return j;
}

nlohmann::json half_json(const std::vector<CacheSimResult>& res) {
  const double min = res.back().miss_rate();
  nlohmann::json j = {{"capacity", res.back().capacity}, {"requests", res.back().requests}};
  std::string best;
  double best_rate = 2.0;
  for (const auto& r : res) {
    j["miss_rate"][r.policy] = r.miss_rate();
    j["misses"][r.policy] = r.misses;
    j["ratio_to_belady"][r.policy] = min > 0 ? r.miss_rate() / min : (r.misses == 0 ? 1.0 : INFINITY);
    if (r.policy != "belady" && r.miss_rate() < best_rate) {
      best_rate = r.miss_rate();
      best = r.policy;
    }
  }
  j["best_online"] = best;
  return j;
}

nlohmann::json load_json(const LoadMetrics& m) {
  return {{"max_load", m.max_load},
          {"avg_max_load", m.avg_max_load},
          {"ideal", m.ideal},
          {"max_load_ratio", m.ideal > 0 ? m.max_load / m.ideal : 0.0},
          {"avg_max_load_ratio", m.ideal > 0 ? m.avg_max_load / m.ideal : 0.0}};
}

const CacheSimResult* best_online(const std::vector<CacheSimResult>& res) {
  const CacheSimResult* best = nullptr;
  for (const auto& r : res) {
    if (r.policy != "belady" && (!best || r.miss_rate() < best->miss_rate())) best = &r;
  }
  return best;
}

std::string half_table(const std::vector<CacheSimResult>& res) {
  std::ostringstream o;
  const double min = res.back().miss_rate();
  o << "| policy | miss rate | misses | x Belady's MIN |\n|---|---|---|---|\n";
  for (const auto& r : res) {
    o << "| " << r.policy << " | " << pct(r.miss_rate()) << " | " << r.misses << " | "
      << (min > 0 ? fmt("%.2f", r.miss_rate() / min) : std::string("-")) << " |\n";
  }
  return o.str();
}

std::string placement_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "| devices | method | Max Load (fit) | Max Load (held-out) | Avg Max Load (held-out) | held-out, / "
       "perfect balance |\n"
       "|---|---|---|---|---|---|\n";
  for (const auto& study : r.placement) {
    for (const auto& p : study) {
      const double ideal = p.held_out.ideal > 0 ? p.held_out.ideal : 1.0;
      o << "| " << p.n_dev << " | " << placement_name(p.method) << " | " << fmt("%.2f", p.fit.max_load)
        << " | " << fmt("%.2f", p.held_out.max_load) << " | " << fmt("%.2f", p.held_out.avg_max_load) << " | "
        << fmt("%.3f", p.held_out.max_load / ideal) << " / " << fmt("%.3f", p.held_out.avg_max_load / ideal)
        << " |\n";
    }
  }
  return o.str();
}

std::string activity_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "| layer | max/mean load | active experts per step | idle per step (mean, min-max) | "
       "P(reuse at t+1) | if independent | P(same set at t+1) | if independent "
       "|\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : r.activity.layers) {
    o << "| " << a.layer << " | " << fmt("%.2f", a.load_max_over_mean) << " | " << fmt("%.2f", a.mean_active)
      << " | " << pct(a.inactive_mean) << " (" << pct(a.inactive_min) << "-" << pct(a.inactive_max) << ") | "
      << fmt("%.3f", a.reuse_next_step) << " | " << fmt("%.3f", a.reuse_if_independent) << " | "
      << fmt("%.3f", a.same_set_next_step) << " | " << fmt("%.3f", a.same_set_if_independent) << " |\n";
  }
  return o.str();
}

}  // namespace

AnalysisResult run_analysis(const Trace& t, const AnalysisOptions& opt) {
  if (t.n_steps() < 2)
    throw Error("analyze: trace " + opt.trace_path + " has " + std::to_string(t.n_steps()) +
                " step(s); locality and the held-out placement need at least 2 (record a longer run, e.g. "
                "generate -n 32 --trace-experts FILE)");
  AnalysisResult r;
  r.trace = &t;
  r.options = opt;
  r.activity = activity_stats(t);
  r.per_layer = miss_curve(t, CacheScope::PerLayer, opt.lfu_decay);
  r.global = miss_curve(t, CacheScope::Global, opt.lfu_decay);
  r.half_per_layer = std::max(1, t.info.n_expert / 2);
  for (const auto& p : simulated_policy_names()) {
    r.half_layer_results.push_back(
        simulate_cache(t, p, CacheScope::PerLayer, r.half_per_layer, opt.lfu_decay));
    r.half_global_results.push_back(
        simulate_cache(t, p, CacheScope::Global, r.half_per_layer * t.info.n_moe(), opt.lfu_decay));
  }
  for (int d : opt.devices) {
    if (d < 1 || d > t.info.n_expert) {
      r.skipped_devices.push_back(d);
      continue;
    }
    r.placement.push_back(placement_study(t, d));
  }
  return r;
}

nlohmann::json analysis_json(const AnalysisResult& r) {
  const Trace& t = *r.trace;
  nlohmann::json j;
  j["trace"] = {{"path", r.options.trace_path},
                {"model", t.info.model_name},
                {"n_layer", t.info.n_layer},
                {"n_expert", t.info.n_expert},
                {"top_k", t.info.top_k},
                {"moe_layers", t.info.moe_layers},
                {"static_gating", t.info.static_gating},
                {"n_steps", t.n_steps()},
                {"mean_tokens_per_step", r.activity.mean_tokens_per_step}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& a : r.activity.layers) {
    layers.push_back({{"layer", a.layer},
                      {"token_fraction", a.token_fraction},
                      {"load_max_over_mean", a.load_max_over_mean},
                      {"mean_active_experts", a.mean_active},
                      {"inactive_fraction_mean", a.inactive_mean},
                      {"inactive_fraction_min", a.inactive_min},
                      {"inactive_fraction_max", a.inactive_max},
                      {"reuse_next_step", a.reuse_next_step},
                      {"reuse_if_independent", a.reuse_if_independent},
                      {"same_set_next_step", a.same_set_next_step},
                      {"same_set_if_independent", a.same_set_if_independent}});
  }
  j["activity"] = {{"inactive_fraction_mean", r.activity.inactive_mean},
                   {"reuse_next_step", r.activity.reuse_next_step},
                   {"reuse_if_independent", r.activity.reuse_if_independent},
                   {"layers", layers}};
  j["cache"] = {{"lfu_decay", r.options.lfu_decay},
                {"curves", {curve_json(r.per_layer), curve_json(r.global)}},
                {"half",
                 {{"experts_per_layer", r.half_per_layer},
                  {"per-layer", half_json(r.half_layer_results)},
                  {"global", half_json(r.half_global_results)}}}};
  nlohmann::json pl = nlohmann::json::array();
  for (const auto& study : r.placement) {
    nlohmann::json methods = nlohmann::json::array();
    for (const auto& p : study) {
      methods.push_back({{"method", placement_name(p.method)},
                         {"fit", load_json(p.fit)},
                         {"held_out", load_json(p.held_out)},
                         {"device_of_expert", p.device}});
    }
    pl.push_back({{"devices", study[0].n_dev}, {"methods", methods}});
  }
  j["placement"] = pl;
  j["placement_skipped_devices"] = r.skipped_devices;
  return j;
}

std::string analysis_text(const AnalysisResult& r) {
  const Trace& t = *r.trace;
  std::ostringstream o;
  o << "trace " << r.options.trace_path << ": " << t.info.model_name << ", " << t.n_steps() << " steps, "
    << fmt("%.1f", r.activity.mean_tokens_per_step) << " tokens/step, " << t.info.n_moe() << " MoE layers x "
    << t.info.n_expert << " experts, top-" << t.info.top_k << "\n\n";
  o << "idle experts per step: " << pct(r.activity.inactive_mean) << " on average\n";
  o << "temporal locality, P(expert used at t is used at t+1): " << fmt("%.3f", r.activity.reuse_next_step)
    << " (independent steps: " << fmt("%.3f", r.activity.reuse_if_independent) << ")\n";
  for (const auto& a : r.activity.layers) {
    o << "  layer " << a.layer << ": " << fmt("%.3f", a.reuse_next_step) << " ("
      << fmt("%.3f", a.reuse_if_independent) << "), idle " << pct(a.inactive_mean) << ", max/mean load "
      << fmt("%.2f", a.load_max_over_mean) << "\n";
  }
  auto half = [&](const char* label, const std::vector<CacheSimResult>& res) {
    o << "\nmiss rate at half the experts (" << label << ", " << res.back().capacity << " experts):\n";
    const double min = res.back().miss_rate();
    for (const auto& x : res) {
      o << "  " << x.policy << std::string(18 - std::min<size_t>(17, x.policy.size()), ' ')
        << pct(x.miss_rate());
      if (min > 0) o << "  (" << fmt("%.2f", x.miss_rate() / min) << "x MIN)";
      o << "\n";
    }
    if (const auto* b = best_online(res)) o << "  best online policy: " << b->policy << "\n";
  };
  half("per layer", r.half_layer_results);
  half("global", r.half_global_results);
  if (!r.placement.empty()) {
    o << "\nplacement (fitted on the first half, evaluated on the second; tokens per step):\n";
    for (const auto& study : r.placement) {
      for (const auto& p : study) {
        o << "  D=" << p.n_dev << " " << placement_name(p.method)
          << std::string(18 - std::string(placement_name(p.method)).size(), ' ') << "Max Load "
          << fmt("%.2f", p.held_out.max_load) << "  Avg Max Load " << fmt("%.2f", p.held_out.avg_max_load)
          << "  (perfect balance " << fmt("%.2f", p.held_out.ideal) << ")\n";
      }
    }
  }
  for (int d : r.skipped_devices)
    o << "  (skipped " << d << " devices: more than the " << t.info.n_expert << " experts per layer)\n";
  return o.str();
}

std::vector<std::string> write_report(const AnalysisResult& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("analyze: cannot create --out " + dir + ": " + ec.message());
  std::vector<std::string> files = write_plots(r, dir);
  write_whole_file(dir + "/analysis.json", json_text(analysis_json(r), 1) + "\n");
  files.push_back("analysis.json");
  const Trace& t = *r.trace;
  std::ostringstream md;
  md << "# Expert trace analysis\n\nTrace `" << r.options.trace_path << "`: model " << t.info.model_name
     << ", " << t.n_steps() << " forward steps, " << fmt("%.1f", r.activity.mean_tokens_per_step)
     << " tokens per step on average, " << t.info.n_moe() << " MoE layers of " << t.info.n_expert
     << " experts, top-" << t.info.top_k << ".\n\n";
  md << "## Activation\n\nIdle experts per step: " << pct(r.activity.inactive_mean) << " on average.\n\n"
     << activity_table(r) << "\n![idle experts](idle_experts.svg)\n\n![temporal locality](locality.svg)\n\n";
  for (int l : t.info.moe_layers) md << "![layer " << l << "](heatmap_layer" << l << ".svg)\n\n";
  md << "## Cache miss rate\n\nEach step's demand is the set of experts with tokens in each layer, served as "
        "the expert store serves a layer: its resident experts first, and none of the layer's experts evicted "
        "while it runs (unless it needs more than the cache holds). Misses include the cold start."
     << " LFU decay per step: " << r.options.lfu_decay << ".\n\n"
     << "At half the experts, one cache per layer (" << r.half_per_layer << " per layer):\n\n"
     << half_table(r.half_layer_results) << "\nAt half the experts, one cache for all layers:\n\n"
     << half_table(r.half_global_results)
     << "\n![miss rate per layer](miss_rate_per_layer.svg)\n\n![miss rate global](miss_rate_global.svg)\n\n";
  if (!r.placement.empty()) {
    md << "## Expert placement\n\nFitted on the first half of the steps, evaluated on the second (tokens per "
          "step; "
          "Max Load = busiest device's mean load, Avg Max Load = mean over steps of the busiest device's "
          "load).\n\n"
       << placement_table(r) << "\n![placement](placement.svg)\n";
  }
  write_whole_file(dir + "/summary.md", md.str());
  files.push_back("summary.md");
  return files;
}

}  // namespace sy
