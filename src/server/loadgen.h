// Load generator for an OpenAI-compatible server, with the workload of the ExpertFlow
// evaluation: requests arrive as a Poisson process of rate lambda, prompt and generation
// lengths are uniform in their ranges. Every request is a real streaming
// /v1/completions call (random token-id prompts, ignore_eos so each generates exactly its
// length); the client times the first token and the end.
//
// With several turns per conversation, each later turn sends the conversation so far: the
// last prompt, the last reply as the server's /tokenize gives it back, then new tokens
// (the user's next message). That is what a chat client sends, and what a prefix cache
// saves on.
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
  int requests = 100;  // conversations per run (requests, with one turn each)
  int turns = 1;       // requests per conversation, each sent when the last one's reply is in
  int prompt_min = 32, prompt_max = 256;
  int gen_min = 32, gen_max = 128;
  // Tokens every prompt starts with (a system prompt shared by all requests), before its
  // own prompt-len tokens: what prefix reuse saves.
  int shared_prefix = 0;
  uint64_t seed = 1;
  // Of every request: 0 is greedy; above it the server samples (OpenAI's defaults
  // otherwise: no top-p, no top-k).
  double temperature = 0;
  // Mixed into the token ids' streams only: the CLI draws one per invocation, so that a
  // second loadgen with the same --seed does not find its prompts in the server's prefix
  // cache from the first (lengths and arrivals still follow the seed alone).
  uint64_t token_salt = 0;
  std::string model;     // empty: the server's first model
  bool progress = true;  // a progress line on stderr
};

struct WorkItem {
  double arrival = 0;  // seconds after the run starts
  std::vector<int32_t> prompt;
  int gen_len = 0;
  // Turns 2, 3, ... of the conversation: the tokens the user adds after the last reply,
  // and the length of the next reply.
  struct FollowUp {
    std::vector<int32_t> tokens;
    int gen_len = 0;
  };
  std::vector<FollowUp> follow_ups;
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
  int requests = 0, completed = 0, failed = 0;  // HTTP requests: conversations x turns
  double duration_s = 0;
  double requests_per_s = 0, output_tokens_per_s = 0, input_tokens_per_s = 0;
  // Closed loop: output tokens/s while all clients had a request in flight, from the start
  // until the first client found no request left. A finite closed-loop run ends with a
  // tail in which fewer and fewer clients are busy; this is the rate at the concurrency
  // asked for. Open loop: 0.
  double steady_window_s = 0, steady_output_tokens_per_s = 0;
  Summary ttft_ms, tpot_ms, e2e_s;
  Summary ttft_follow_up_ms;  // turns after the first of a conversation (none with one turn)
  // Prompt tokens of the completed requests, and how many of them the server reported as
  // served from its prompt cache (usage.prompt_tokens_details.cached_tokens; -1: it did not say).
  int64_t prompt_tokens = 0, cached_prompt_tokens = -1;
  std::string first_error;
};

// When one request's tokens arrived: it started at `start` (seconds from the run's start),
// its first token came `ttft` later and its last at `end`.
struct RequestTiming {
  double start = 0, ttft = 0, end = 0;
  int64_t tokens = 0;
};
// Output tokens received by time t, summed over requests: all of a request that ended by
// then, none of one whose first token came later, and for one in flight its first token
// plus the rest in proportion to the time elapsed between its first and last token (the
// client sees whole events, not token counts, so the rest is interpolated).
double tokens_received_by(const std::vector<RequestTiming>& requests, double t);

// The workload of the run-th run (0-based) of an invocation at a rate. The same seed gives
// the same prompt and generation lengths, and the same arrivals at the same rate, in every
// run; the token ids (shared prefix included) are drawn afresh for each run, so that no run
// finds its prompts in a server's prefix cache, left there by the runs before it. The first
// turns are the same whatever the number of turns.
std::vector<WorkItem> make_workload(const LoadgenConfig& cfg, int32_t n_vocab, double rate, int run = 0);
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
  // (label without the round), in first-seen order. The baseline is the round's baseline
  // run, else its run of one client (concurrency 1); empty without either. `steady`:
  // the closed-loop runs' steady rates over the baseline's (open-loop runs are left out).
  struct RatioSummary {
    std::string label;
    std::vector<double> ratios;  // one per round
    double median = 0, min = 0, max = 0;
  };
  static std::vector<RatioSummary> ratios_to_baseline(const std::vector<RunReport>& runs, bool steady = false);

  const std::string& model() const { return model_; }
  static std::string table(const std::vector<RunReport>& runs);
  nlohmann::json report_json(const std::vector<RunReport>& runs) const;

 private:
  LoadgenConfig cfg_;
  std::string model_;
  int32_t n_vocab_ = 32000;
  int runs_started_ = 0;  // numbers each run's token ids
};

}  // namespace sy
