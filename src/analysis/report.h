// `switchyard analyze`: everything the offline analysis computes from one trace, its JSON
// form, the SVG plots and a summary.md that links them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/activity.h"
#include "analysis/cache_sim.h"
#include "analysis/placement.h"
#include "experts/trace.h"

namespace sy {

struct AnalysisOptions {
  std::string trace_path;             // shown in reports
  std::vector<int> devices{2, 4, 8};  // placement studies (counts above n_expert are skipped)
  double lfu_decay = kDefaultLfuDecay;
  int heatmap_columns = 400;  // steps are grouped to at most this many columns
};

struct AnalysisResult {
  const Trace* trace = nullptr;
  AnalysisOptions options;
  ActivityStats activity;
  MissCurve per_layer, global;
  int half_per_layer = 0;  // n_expert / 2: the reference cache size
  std::vector<CacheSimResult> half_layer_results, half_global_results;  // one per policy, Belady last
  std::vector<std::vector<PlacementResult>> placement;                  // per device count
  std::vector<int> skipped_devices;
};

AnalysisResult run_analysis(const Trace& t, const AnalysisOptions& opt);
nlohmann::json analysis_json(const AnalysisResult& r);
// A human-readable summary for the terminal.
std::string analysis_text(const AnalysisResult& r);
// Writes the SVG plots, analysis.json and summary.md into dir (created if missing);
// returns the files written, relative to dir. Throws sy::Error naming a path on failure.
std::vector<std::string> write_report(const AnalysisResult& r, const std::string& dir);
// The SVG plots alone (used by write_report); returns the file names.
std::vector<std::string> write_plots(const AnalysisResult& r, const std::string& dir);

}  // namespace sy
