// switchyard loadgen: Poisson-arrival load against an OpenAI-compatible server.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>

#include "base/error.h"
#include "base/json_text.h"
#include "base/whole_file.h"
#include "cli/common.h"
#include "server/loadgen.h"

namespace sy::cli {
namespace {

constexpr int kMaxConcurrency = 4096;  // closed-loop clients, one thread each

void parse_range(const std::string& s, const char* flag, int& lo, int& hi) {
  const auto colon = s.find(':');
  try {
    size_t used = 0;
    lo = std::stoi(s.substr(0, colon), &used);
    if (used != (colon == std::string::npos ? s.size() : colon)) throw std::invalid_argument(s);
    hi = lo;
    if (colon != std::string::npos) {
      hi = std::stoi(s.substr(colon + 1), &used);
      if (used != s.size() - colon - 1) throw std::invalid_argument(s);
    }
  } catch (const std::exception&) {
    throw Error(std::string(flag) + ": expected MIN:MAX (or one number), got '" + s + "'");
  }
  if (lo < 1 || hi < lo) throw Error(std::string(flag) + ": expected 1 <= MIN <= MAX, got '" + s + "'");
}

template <class T>
std::vector<T> parse_list(const std::string& s, const char* flag) {
  std::vector<T> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string item = s.substr(i, j - i);
    try {
      if (item == "inf") {
        out.push_back(std::numeric_limits<T>::infinity());
      } else {
        size_t used = 0;
        const double v = std::stod(item, &used);
        if (used != item.size() || !(v > 0)) throw std::invalid_argument(item);
        out.push_back(static_cast<T>(v));
      }
    } catch (const std::exception&) {
      throw Error(std::string(flag) + ": '" + item + "' is not a positive number (a comma-separated list" +
                  (std::numeric_limits<T>::has_infinity ? ", or inf)" : ")"));
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

void add_loadgen(CLI::App& app) {
  struct Args {
    std::string url = "http://127.0.0.1:8080", rates, concurrency, prompt_len = "32:256", gen_len = "32:128",
                out, model, api_key;
    int requests = 100, rounds = 1, shared_prefix = 0, turns = 1;
    uint64_t seed = 1;
    bool json = false, baseline = false, quiet = false;
    double timeout = 600, temperature = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "loadgen",
      "Poisson-arrival load against an OpenAI-compatible server; latency percentiles and throughput");
  c->footer(
      "Example: switchyard loadgen --url http://127.0.0.1:8080 --rate 1,2,4,8 --requests 100 \\\n"
      "           --prompt-len 32:256 --gen-len 32:128 --baseline --seed 1\n"
      "Each request streams /v1/completions with a random token prompt and ignore_eos, so it generates "
      "exactly\n"
      "its length. TTFT: first streamed token; TPOT: (end - first token) / (tokens - 1); E2E: whole "
      "request.");
  c->add_option("--url", a->url, "Server base URL")->capture_default_str();
  c->add_option("--rate", a->rates,
                "Arrival rate(s) lambda in requests/s, comma-separated; inf = all at once");
  c->add_option("--concurrency", a->concurrency,
                "Closed-loop run(s) instead: K clients back to back, comma-separated");
  c->add_flag("--baseline", a->baseline,
              "First run requests of the same lengths one at a time (the baseline for the ratios; "
              "without it, a --concurrency 1 run is the baseline)");
  c->add_option("--rounds", a->rounds,
                "Repeat the baseline and every run this many times, interleaved; the ratios to the "
                "baseline are then taken per round and summarized by their median (the bandwidth of a "
                "shared machine drifts from minute to minute)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  c->add_option("-n,--requests", a->requests, "Requests per run (with --turns: conversations per run)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->add_option("--prompt-len", a->prompt_len, "Prompt length range in tokens, MIN:MAX (uniform)")
      ->capture_default_str();
  c->add_option("--gen-len", a->gen_len, "Generated length range in tokens, MIN:MAX (uniform)")
      ->capture_default_str();
  c->add_option("--shared-prefix", a->shared_prefix,
                "Tokens every prompt starts with, before its own --prompt-len tokens (a system prompt "
                "all requests share: what the server's prefix reuse saves)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  c->add_option("--turns", a->turns,
                "Requests per conversation: each later turn sends the last prompt, the last reply (as the "
                "server's /tokenize gives it back) and --prompt-len new tokens, once the reply is in (a chat: "
                "what the server's prefix cache saves)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--seed", a->seed,
                "Workload seed (the same seed gives the same lengths and arrivals; each run and each invocation "
                "draws its own token ids)")
      ->check(non_negative_number())
      ->capture_default_str();
  c->add_option("--temperature", a->temperature,
                "Sampling temperature of every request: 0 = greedy; above 0 the server samples, with OpenAI's other "
                "defaults (no top-p, no top-k)")
      ->check(CLI::Range(0.0, 2.0))
      ->capture_default_str();
  c->add_option("--model", a->model, "Model name to request (default: the server's first)");
  c->add_option("--api-key", a->api_key, "Bearer token (also from $SWITCHYARD_API_KEY)")
      ->envname("SWITCHYARD_API_KEY");
  c->add_option("--timeout", a->timeout,
                "Seconds a request may take from its send to its last event (a longer or silent one fails)")
      ->check(positive_number())
      ->capture_default_str();
  c->add_flag("--json", a->json, "Print the report as JSON (the table goes to stderr)");
  c->add_option("-o,--output", a->out, "Also write the JSON report to this file");
  c->add_flag("-q,--quiet", a->quiet, "No progress line");
  c->callback([a] {
    LoadgenConfig cfg;
    cfg.endpoint = HttpEndpoint::parse(a->url);
    cfg.endpoint.api_key = a->api_key;
    cfg.endpoint.timeout_s = a->timeout;
    cfg.temperature = a->temperature;
    if (!a->rates.empty()) cfg.rates = parse_list<double>(a->rates, "--rate");
    if (!a->concurrency.empty()) {
      for (double k : parse_list<double>(a->concurrency, "--concurrency")) {
        // Each client is a thread; 0 or a value past int would silently turn into an open-loop burst.
        if (!std::isfinite(k) || k != std::floor(k) || k < 1 || k > kMaxConcurrency) {
          char got[32];
          std::snprintf(got, sizeof got, "%g", k);
          throw Error("--concurrency: expected whole numbers from 1 to " + std::to_string(kMaxConcurrency) + ", got " +
                      got);
        }
        cfg.concurrency.push_back(static_cast<int>(k));
      }
    }
    if (cfg.rates.empty() && cfg.concurrency.empty() && !a->baseline)
      throw Error("loadgen: give --rate, --concurrency or --baseline");
    cfg.baseline = a->baseline;
    cfg.requests = a->requests;
    cfg.rounds = a->rounds;
    parse_range(a->prompt_len, "--prompt-len", cfg.prompt_min, cfg.prompt_max);
    parse_range(a->gen_len, "--gen-len", cfg.gen_min, cfg.gen_max);
    cfg.seed = a->seed;
    std::random_device entropy;
    cfg.token_salt = (uint64_t{entropy()} << 32) ^ entropy();
    cfg.shared_prefix = a->shared_prefix;
    cfg.turns = a->turns;
    cfg.model = a->model;
    cfg.progress = !a->quiet && isatty(STDERR_FILENO);
    Loadgen lg(cfg);
    const std::string per_run = cfg.turns > 1 ? std::to_string(cfg.requests) + " conversations of " +
                                                    std::to_string(cfg.turns) + " turns per run"
                                              : std::to_string(cfg.requests) + " requests per run";
    std::fprintf(stderr, "loadgen: %s at %s, %s, prompts %s%d:%d, generations %d:%d tokens\n", lg.model().c_str(),
                 a->url.c_str(), per_run.c_str(),
                 cfg.shared_prefix > 0 ? (std::to_string(cfg.shared_prefix) + " shared + ").c_str() : "",
                 cfg.prompt_min, cfg.prompt_max, cfg.gen_min, cfg.gen_max);
    const auto runs = lg.run_all();
    const auto report = lg.report_json(runs);
    const std::string table = Loadgen::table(runs);
    if (a->json) {
      std::fputs(table.c_str(), stderr);
      std::printf("%s\n", json_text(report, 2).c_str());
    } else {
      std::fputs(table.c_str(), stdout);
    }
    if (!a->out.empty()) write_whole_file(a->out, json_text(report, 2) + "\n");
    // The report counts only completed requests, so a run with failures must not pass for a
    // clean one in a script: exit non-zero, after the figures, naming the first error.
    int failed = 0, sent = 0;
    std::string first_error;
    for (const RunReport& r : runs) {
      failed += r.failed;
      sent += r.requests;
      if (first_error.empty()) first_error = r.first_error;
    }
    if (failed > 0) {
      throw Error("loadgen: " + std::to_string(failed) + " of " + std::to_string(sent) +
                  " requests failed; the figures above count only the completed ones (first error: " + first_error +
                  ")");
    }
  });
}

}  // namespace sy::cli
