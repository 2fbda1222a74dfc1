// switchyard analyze: offline analysis of an expert trace (--trace-experts of generate
// and perplexity): activation heatmaps, idle experts, temporal locality, cache miss rate
// versus cache size per policy against Belady's MIN, and expert placement over devices.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "analysis/report.h"
#include "base/error.h"
#include "base/json_text.h"
#include "cli/common.h"

namespace sy::cli {

void add_analyze(CLI::App& app) {
  struct Args {
    std::string trace, out, devices = "2,4,8";
    double lfu_decay = kDefaultLfuDecay;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "analyze", "Analyze an expert trace: heatmaps, locality, cache miss rates, placement");
  c->footer(
      "Example:\n"
      "  switchyard perplexity -m models/tiny-mixtral-f16.gguf -f valid.txt -c 256 --chunks 20 "
      "--trace-experts ppl.sytrace\n"
      "  switchyard analyze ppl.sytrace --out ppl-analysis --devices 2,4,8");
  c->add_option("trace", a->trace, "Trace file written by --trace-experts (binary or .jsonl)")->required();
  c->add_option("-o,--out", a->out, "Write SVG plots, analysis.json and summary.md into this folder");
  c->add_option("--devices", a->devices,
                "Device counts for the placement study, comma-separated (default 2,4,8)");
  c->add_option("--lfu-decay", a->lfu_decay, "Per-step decay of the LFU policy's frequencies")
      ->check(CLI::Range(1e-6, 1.0));
  c->add_flag("--json", a->json, "Print the results as one JSON object");
  c->callback([a] {
    AnalysisOptions opt;
    opt.trace_path = a->trace;
    opt.lfu_decay = a->lfu_decay;
    opt.devices.clear();
    std::stringstream list(a->devices);
    for (std::string item; std::getline(list, item, ',');) {
      size_t used = 0;
      int d = 0;
      try {
        d = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size() || d < 1) {
        throw Error("--devices: '" + item + "' is not a device count; expected positive integers like 2,4,8");
      }
      opt.devices.push_back(d);
    }
    if (opt.devices.empty()) throw Error("--devices: no device count given; expected positive integers like 2,4,8");
    const Trace trace = read_trace(a->trace);
    const AnalysisResult r = run_analysis(trace, opt);
    std::vector<std::string> files;
    if (!a->out.empty()) files = write_report(r, a->out);
    if (a->json) {
      nlohmann::json j = analysis_json(r);
      if (!a->out.empty()) j["files"] = files;
      std::printf("%s\n", json_text(j).c_str());
      return;
    }
    std::fputs(analysis_text(r).c_str(), stdout);
    if (!a->out.empty()) {
      std::printf("\nwrote %zu files to %s (open %s/summary.md)\n", files.size(), a->out.c_str(),
                  a->out.c_str());
    } else {
      std::printf("\n(use --out DIR for the SVG plots and a summary.md)\n");
    }
  });
}

}  // namespace sy::cli
