// Load generator for an OpenAI-compatible server, with the workload of the ExpertFlow
// evaluation: requests arrive as a Poisson process of rate lambda, prompt and generation
// lengths are uniform in their ranges. Every request is a real streaming
// /v1/completions call (random token-id prompts, ignore_eos so each generates exactly its
// length); the client times the first token and the end.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/sse_client.h"

namespace sy {

struct LoadgenConfig {
  HttpEndpoint endpoint;
  std::vector<double> rates;  // requests/s; infinity: all at once
  std::vector<int>
      concurrency;        // closed-loop runs: K clients, each sends its next request when the last ends
  bool baseline = false;  // first, the same requests one at a time
  // Repeats of the whole sequence (baseline, concurrency levels, rates), interleaved so
  // that each round's ratios against its own baseline are taken minutes apart at most:
  // on a shared machine the bandwidth drifts between runs.
  int rounds = 1;
  int requests = 100;
  int prompt_min = 32, prompt_max = 256;
  int gen_min = 32, gen_max = 128;
  uint64_t seed = 1;
  std::string model;     // empty: the server's first model
  bool progress = true;  // a progress line on stderr
};

struct WorkItem {
  double arrival = 0;  // seconds after the run starts
  std::vector<int32_t> prompt;
  int gen_len = 0;
};

struct Summary {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};

struct RunReport {
  std::string label;     // name, prefixed with "rN " when there are several rounds
  std::string name;      // "baseline", "concurrency 16", "rate 2", ...
  int round = 0;         // 0-based
  double rate = 0;      // requests/s offered (0: closed loop)
  int concurrency = 0;  // closed loop clients (0: open loop)
  int requests = 0, completed = 0, failed = 0;
  double duration_s = 0;
  double requests_per_s = 0, output_tokens_per_s = 0, input_tokens_per_s = 0;
  Summary ttft_ms, tpot_ms, e2e_s;
  std::string first_error;
};

// The workload for a rate (same seed: same prompts and lengths whatever the rate).
std::vector<WorkItem> make_workload(const LoadgenConfig& cfg, int32_t n_vocab, double rate);
Summary summarize(std::vector<double> v);

class Loadgen {
 public:
  // Asks the server for its model (name and vocabulary size); throws sy::Error when it
  // cannot reach it.
  explicit Loadgen(LoadgenConfig cfg);
  // Runs the baseline (if asked), then every concurrency level and rate.
  std::vector<RunReport> run_all();
  RunReport run(const std::string& label, double rate, int concurrency);

  // Output tokens/s of each run over its round's baseline: median, min and max per run
  // (label without the round), in first-seen order. Empty without a baseline.
  struct RatioSummary {
    std::string label;
    std::vector<double> ratios;  // one per round
    double median = 0, min = 0, max = 0;
  };
  static std::vector<RatioSummary> ratios_to_baseline(const std::vector<RunReport>& runs);

  const std::string& model() const { return model_; }
  static std::string table(const std::vector<RunReport>& runs);
  nlohmann::json report_json(const std::vector<RunReport>& runs) const;

 private:
  LoadgenConfig cfg_;
  std::string model_;
  int32_t n_vocab_ = 32000;
};

}  // namespace sy
