#include "server/loadgen.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/json_text.h"
#include "server/loadgen_replies.h"

namespace sy {

using json = nlohmann::json;

namespace {

using clock = std::chrono::steady_clock;

struct Result {
  bool ok = false;
  double start = 0, ttft = -1, end = 0;  // seconds: start from the run's start, the others from the request's
  int64_t in_tokens = 0, out_tokens = 0;
  int64_t cached_tokens = -1;  // -1: the server did not say
  int turn = 0;
  std::string error;
};

double since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// One streaming completion; the reply's text goes to *text when it is given.
Result send_one(const HttpEndpoint& ep, const std::string& model, double temperature, const std::vector<int32_t>& prompt,
                int gen_len, clock::time_point run_start, std::string* text = nullptr) {
  Result r;
  const json body = {{"model", model},
                     {"prompt", prompt},
                     {"max_tokens", gen_len},
                     {"temperature", temperature},
                     {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const auto t0 = clock::now();
  r.start = std::chrono::duration<double>(t0 - run_start).count();
  r.in_tokens = static_cast<int64_t>(prompt.size());
  const HttpReply reply = http_post_sse(ep, "/v1/completions", json_text(body), [&](const std::string& data) {
    // --timeout bounds the whole request: the socket's read timeout (the same value) ends a
    // silent one, and this a request that streams for too long.
    if (since(t0) > ep.timeout_s) {
      r.error = "the request took longer than --timeout " + format_seconds(ep.timeout_s);
      return false;
    }
    const StreamEvent ev = parse_stream_event(data);
    if (ev.done) return true;
    if (!ev.error.empty()) {
      r.error = ev.error;
      return false;
    }
    if (r.ttft < 0 && ev.has_choice) r.ttft = since(t0);
    if (text) *text += ev.text;
    if (ev.completion_tokens) r.out_tokens = *ev.completion_tokens;
    if (ev.prompt_tokens) r.in_tokens = *ev.prompt_tokens;
    if (ev.cached_tokens) r.cached_tokens = *ev.cached_tokens;
    return true;
  });
  r.end = since(t0);
  if (reply.status == 0) {
    if (r.error.empty()) r.error = "no response: " + reply.error;
  } else if (reply.status != 200) {
    r.error = "HTTP " + std::to_string(reply.status) + ": " + error_message_of(reply.body);
  } else if (r.error.empty() && !reply.done) {
    r.error = "the stream ended without [DONE]";
  }
  r.ok = r.error.empty() && r.ttft >= 0;
  return r;
}

// The ids the server's tokenizer gives `text` (no special tokens added); throws sy::Error.
std::vector<int32_t> tokenize(const HttpEndpoint& ep, const std::string& model, const std::string& text) {
  const json body = {{"model", model}, {"content", text}, {"add_special", false}};
  const HttpReply reply = http_post(ep, "/tokenize", json_text(body));
  if (reply.status != 200) {
    throw Error("POST /tokenize: " +
                (reply.status ? "HTTP " + std::to_string(reply.status) + ": " + error_message_of(reply.body)
                              : reply.error) +
                " (--turns needs it to send a reply back as tokens; switchyard, llama.cpp and vLLM serve it)");
  }
  return parse_tokenize_reply(reply.body);
}

// Every turn of one conversation, one after the other, into results[turn]. A turn that
// cannot be sent (an earlier one failed, or /tokenize did not answer) fails with the reason.
void converse(const HttpEndpoint& ep, const std::string& model, double temperature, const WorkItem& w, int turns,
              clock::time_point run_start, Result* results, std::atomic<int>& finished) {
  std::vector<int32_t> prompt = w.prompt;
  int gen_len = w.gen_len;
  for (int t = 0; t < turns; ++t) {
    std::string reply;
    results[t] = send_one(ep, model, temperature, prompt, gen_len, run_start, t + 1 < turns ? &reply : nullptr);
    results[t].turn = t;
    finished++;
    if (t + 1 == turns) return;
    std::string failed = results[t].ok ? "" : "an earlier turn of its conversation failed";
    if (failed.empty()) {
      try {
        const std::vector<int32_t> ids = tokenize(ep, model, reply);
        prompt.insert(prompt.end(), ids.begin(), ids.end());
      } catch (const Error& e) {
        failed = e.what();
      }
    }
    if (!failed.empty()) {
      for (int u = t + 1; u < turns; ++u) {
        results[u].error = failed;
        results[u].turn = u;
        finished++;
      }
      return;
    }
    const WorkItem::FollowUp& next = w.follow_ups[static_cast<size_t>(t)];
    prompt.insert(prompt.end(), next.tokens.begin(), next.tokens.end());
    gen_len = next.gen_len;
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace

std::vector<WorkItem> make_workload(const LoadgenConfig& cfg, int32_t n_vocab, double rate, int run) {
  std::mt19937_64 rng(cfg.seed);
  std::uniform_int_distribution<int> plen(cfg.prompt_min, cfg.prompt_max), glen(cfg.gen_min, cfg.gen_max);
  // Ordinary tokens: skip the first ids (control and byte tokens in most vocabularies) and
  // the last ones (where added special tokens usually live).
  const int32_t lo = std::min<int32_t>(300, n_vocab / 4),
                hi = std::max<int32_t>(lo + 1, n_vocab - std::min<int32_t>(1000, n_vocab / 4));
  std::uniform_int_distribution<int32_t> tok(lo, hi - 1);
  // Token ids from their own stream per run (and per invocation, by the salt): a server that
  // caches prompt prefixes must not find a later run's prompts left by an earlier one.
  std::mt19937_64 tokens(cfg.seed ^ cfg.token_salt ^ (0x5851F42D4C957F2Dull * static_cast<uint64_t>(run + 1)));
  std::vector<int32_t> prefix(static_cast<size_t>(std::max(0, cfg.shared_prefix)));
  for (auto& t : prefix) t = tok(tokens);
  std::vector<WorkItem> items(static_cast<size_t>(cfg.requests));
  for (auto& w : items) {
    w.prompt = prefix;
    w.prompt.resize(prefix.size() + static_cast<size_t>(plen(rng)));
    for (size_t i = prefix.size(); i < w.prompt.size(); ++i) w.prompt[i] = tok(tokens);
    w.gen_len = glen(rng);
  }
  // Later turns from streams of their own, so that the first turns do not depend on them.
  std::mt19937_64 follow_lengths(cfg.seed ^ 0xD1B54A32D192ED03ull), follow_tokens(tokens());
  for (auto& w : items) {
    w.follow_ups.resize(static_cast<size_t>(std::max(0, cfg.turns - 1)));
    for (auto& f : w.follow_ups) {
      f.tokens.resize(static_cast<size_t>(plen(follow_lengths)));
      for (auto& t : f.tokens) t = tok(follow_tokens);
      f.gen_len = glen(follow_lengths);
    }
  }
  // Arrival times from their own stream, so the prompts do not depend on the rate.
  std::mt19937_64 arrivals(cfg.seed ^ 0x9E3779B97F4A7C15ull);
  double t = 0;
  for (auto& w : items) {
    if (std::isfinite(rate) && rate > 0) t += std::exponential_distribution<double>(rate)(arrivals);
    w.arrival = t;
  }
  return items;
}

double tokens_received_by(const std::vector<RequestTiming>& requests, double t) {
  double n = 0;
  for (const RequestTiming& r : requests) {
    const double first = r.start + r.ttft, last = r.start + r.end;
    if (r.tokens <= 0 || first > t) continue;
    if (last <= t || last <= first) {
      n += static_cast<double>(r.tokens);
    } else {
      n += 1 + static_cast<double>(r.tokens - 1) * (t - first) / (last - first);
    }
  }
  return n;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {  // linear interpolation between closest ranks (numpy's default)
    const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
    const size_t i = static_cast<size_t>(pos);
    const double f = pos - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
  };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

Loadgen::Loadgen(LoadgenConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.requests < 1) throw Error("--requests must be at least 1");
  if (cfg_.rounds < 1) throw Error("--rounds must be at least 1");
  if (cfg_.prompt_min < 1 || cfg_.prompt_max < cfg_.prompt_min)
    throw Error("--prompt-len: expected MIN:MAX with 1 <= MIN <= MAX");
  if (cfg_.gen_min < 1 || cfg_.gen_max < cfg_.gen_min)
    throw Error("--gen-len: expected MIN:MAX with 1 <= MIN <= MAX");
  if (cfg_.shared_prefix < 0) throw Error("--shared-prefix: expected a number of tokens >= 0");
  if (cfg_.turns < 1) throw Error("--turns must be at least 1");
  const HttpReply r = http_get(cfg_.endpoint, "/v1/models");
  if (r.status != 200) {
    throw Error("cannot list the models at http://" + cfg_.endpoint.host + ":" +
                std::to_string(cfg_.endpoint.port) + cfg_.endpoint.prefix +
                "/v1/models: " + (r.status ? "HTTP " + std::to_string(r.status) + " " + r.body : r.error));
  }
  const ServedModel m = parse_models_reply(r.body, cfg_.model, n_vocab_);
  model_ = m.id;
  n_vocab_ = static_cast<int32_t>(std::min<int64_t>(m.n_vocab, std::numeric_limits<int32_t>::max()));
}

RunReport Loadgen::run(const std::string& label, double rate, int concurrency) {
  const std::vector<WorkItem> items = make_workload(cfg_, n_vocab_, concurrency > 0 ? 0.0 : rate, runs_started_++);
  const int turns = cfg_.turns;
  std::vector<Result> results(items.size() * static_cast<size_t>(turns));
  std::atomic<int> finished{0};
  const auto start = clock::now();
  auto converse_item = [&](size_t i) {
    converse(cfg_.endpoint, model_, cfg_.temperature, items[i], turns, start, &results[i * static_cast<size_t>(turns)], finished);
  };

  std::atomic<bool> stop_progress{false};
  std::thread progress;
  if (cfg_.progress) {
    progress = std::thread([&] {
      while (!stop_progress) {
        std::fprintf(stderr, "\r  %s: %d/%zu done ", label.c_str(), finished.load(), results.size());
        for (int i = 0; i < 10 && !stop_progress; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::fprintf(stderr, "\r  %s: %d/%zu done\n", label.c_str(), finished.load(), results.size());
    });
  }
  // Closed loop: when the first client found no request left (the end of the steady part).
  std::atomic<double> exhausted{std::numeric_limits<double>::infinity()};
  if (concurrency > 0) {
    std::atomic<size_t> next{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < concurrency; ++c) {
      clients.emplace_back([&] {
        for (size_t i; (i = next++) < items.size();) converse_item(i);
        const double t = since(start);
        for (double cur = exhausted.load(); t < cur && !exhausted.compare_exchange_weak(cur, t);) {
        }
      });
    }
    for (auto& t : clients) t.join();
  } else {
    std::vector<std::thread> clients;
    clients.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<clock::duration>(
                                                std::chrono::duration<double>(items[i].arrival)));
      clients.emplace_back([&, i] { converse_item(i); });
    }
    for (auto& t : clients) t.join();
  }
  stop_progress = true;
  if (progress.joinable()) progress.join();

  RunReport rep;
  rep.label = label;
  rep.name = label;  // run_all() keeps the name without the round
  rep.rate = concurrency > 0 ? 0 : rate;
  rep.concurrency = concurrency;
  rep.requests = static_cast<int>(results.size());
  std::vector<double> ttft, tpot, e2e, ttft_later;
  std::vector<RequestTiming> timings;
  int64_t out_tokens = 0, in_tokens = 0;
  // Rates are over the time from the first send to the last completion: an open-loop run's
  // first arrival comes after an exponential gap of its own, which is not the server's time.
  double first_start = std::numeric_limits<double>::infinity(), last_end = 0;
  for (const auto& r : results) {
    if (r.end <= 0) continue;  // never sent (an earlier turn of its conversation failed)
    first_start = std::min(first_start, r.start);
    last_end = std::max(last_end, r.start + r.end);
  }
  if (!std::isfinite(first_start)) first_start = 0;
  for (const auto& r : results) {
    if (!r.ok) {
      rep.failed++;
      if (rep.first_error.empty()) rep.first_error = r.error;
      continue;
    }
    rep.completed++;
    timings.push_back({r.start, r.ttft, r.end, r.out_tokens});
    out_tokens += r.out_tokens;
    in_tokens += r.in_tokens;
    if (r.cached_tokens >= 0) {
      rep.cached_prompt_tokens = std::max<int64_t>(rep.cached_prompt_tokens, 0) + r.cached_tokens;
    }
    ttft.push_back(r.ttft * 1e3);
    if (r.turn > 0) ttft_later.push_back(r.ttft * 1e3);
    e2e.push_back(r.end);
    if (r.out_tokens > 1) tpot.push_back((r.end - r.ttft) * 1e3 / static_cast<double>(r.out_tokens - 1));
  }
  rep.duration_s = last_end - first_start;
  rep.prompt_tokens = in_tokens;
  if (rep.duration_s > 0) {
    rep.requests_per_s = rep.completed / rep.duration_s;
    rep.output_tokens_per_s = static_cast<double>(out_tokens) / rep.duration_s;
    rep.input_tokens_per_s = static_cast<double>(in_tokens) / rep.duration_s;
  }
  if (concurrency > 0 && std::isfinite(exhausted.load()) && exhausted.load() > first_start) {
    const double steady_end = std::min(exhausted.load(), last_end);  // a client notices a moment after its last end
    rep.steady_window_s = steady_end - first_start;
    rep.steady_output_tokens_per_s = tokens_received_by(timings, steady_end) / rep.steady_window_s;
  }
  rep.ttft_ms = summarize(ttft);
  rep.tpot_ms = summarize(tpot);
  rep.e2e_s = summarize(e2e);
  rep.ttft_follow_up_ms = summarize(ttft_later);
  return rep;
}

std::vector<RunReport> Loadgen::run_all() {
  std::vector<RunReport> runs;
  for (int round = 0; round < cfg_.rounds; ++round) {
    const std::string prefix = cfg_.rounds > 1 ? "r" + std::to_string(round + 1) + " " : "";
    auto add = [&](const std::string& name, double rate, int concurrency) {
      runs.push_back(run(prefix + name, rate, concurrency));
      runs.back().name = name;
      runs.back().round = round;
    };
    if (cfg_.baseline) add("baseline", 0, 1);
    for (int c : cfg_.concurrency) add("concurrency " + std::to_string(c), 0, c);
    for (double r : cfg_.rates) add(std::isfinite(r) ? "rate " + fmt("%g", r) : "rate inf", r, 0);
  }
  return runs;
}

namespace {

// The run the ratios of `round` are taken against: its baseline run, or else its run of one
// closed-loop client (`--concurrency 1,16` is the same one-at-a-time run); null when neither.
const RunReport* baseline_of(const std::vector<RunReport>& runs, int round) {
  const RunReport* single = nullptr;
  for (const auto& r : runs) {
    if (r.round != round) continue;
    if (r.name == "baseline") return &r;
    if (r.concurrency == 1 && !single) single = &r;
  }
  return single;
}

// Run r's output tokens/s (`steady`: its steady rate) over its round's baseline; none
// without a baseline, and none for the baseline itself.
std::optional<double> ratio_to_baseline(const std::vector<RunReport>& runs, const RunReport& r, bool steady) {
  const RunReport* base = baseline_of(runs, r.round);
  // With one client, the steady rate is that of the whole run.
  const double rate = base ? (steady ? base->steady_output_tokens_per_s : base->output_tokens_per_s) : 0;
  if (base == &r || rate <= 0) return std::nullopt;
  return (steady ? r.steady_output_tokens_per_s : r.output_tokens_per_s) / rate;
}

}  // namespace

std::vector<Loadgen::RatioSummary> Loadgen::ratios_to_baseline(const std::vector<RunReport>& runs, bool steady) {
  std::vector<RatioSummary> out;
  for (const auto& r : runs) {
    const std::optional<double> ratio = ratio_to_baseline(runs, r, steady);
    if (!ratio || (steady && r.concurrency == 0)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const RatioSummary& s) { return s.label == r.name; });
    if (it == out.end()) it = out.insert(out.end(), RatioSummary{r.name, {}, 0, 0, 0});
    it->ratios.push_back(*ratio);
  }
  for (auto& s : out) {
    const Summary q = summarize(s.ratios);
    s.median = q.p50;
    s.min = *std::min_element(s.ratios.begin(), s.ratios.end());
    s.max = *std::max_element(s.ratios.begin(), s.ratios.end());
  }
  return out;
}

std::string Loadgen::table(const std::vector<RunReport>& runs) {
  std::string out;
  char line[400];
  std::snprintf(line, sizeof(line), "%-20s %6s %6s %9s %10s %7s %8s %7s   %-22s %-22s %-22s\n", "run", "ok",
                "fail", "req/s", "out tok/s", "x base", "steady", "x base", "TTFT p50/p90/p99 ms",
                "TPOT p50/p90/p99 ms", "E2E p50/p90/p99 s");
  out += line;
  auto percentiles = [](const char* f, const Summary& s) {
    return fmt(f, s.p50) + "/" + fmt(f, s.p90) + "/" + fmt(f, s.p99);
  };
  for (const auto& r : runs) {
    const std::string ttft = percentiles("%.0f", r.ttft_ms), tpot = percentiles("%.1f", r.tpot_ms),
                      e2e = percentiles("%.2f", r.e2e_s);
    const bool steady = r.steady_output_tokens_per_s > 0;
    const std::optional<double> q = ratio_to_baseline(runs, r, false), qs = ratio_to_baseline(runs, r, true);
    const std::string ratio = q ? fmt("%.2f", *q) : "-";
    const std::string steady_rate = steady ? fmt("%.1f", r.steady_output_tokens_per_s) : "-";
    const std::string steady_ratio = steady && qs ? fmt("%.2f", *qs) : "-";
    std::snprintf(line, sizeof(line), "%-20s %6d %6d %9.2f %10.1f %7s %8s %7s   %-22s %-22s %-22s\n",
                  r.label.c_str(), r.completed, r.failed, r.requests_per_s, r.output_tokens_per_s, ratio.c_str(),
                  steady_rate.c_str(), steady_ratio.c_str(), ttft.c_str(), tpot.c_str(), e2e.c_str());
    out += line;
    const bool later_turns = r.ttft_follow_up_ms.mean > 0;
    if (later_turns || r.cached_prompt_tokens > 0) {
      out += "  ";
      if (later_turns) out += "later turns: TTFT p50/p90/p99 " + percentiles("%.0f", r.ttft_follow_up_ms) + " ms; ";
      out += "prompt tokens served from the server's cache: ";
      if (r.cached_prompt_tokens < 0) {
        out += "not reported\n";
      } else {
        const double share = static_cast<double>(r.cached_prompt_tokens) / std::max<double>(1, r.prompt_tokens);
        out += std::to_string(r.cached_prompt_tokens) + " of " + std::to_string(r.prompt_tokens) + " (" +
               fmt("%.1f", 100 * share) + "%)\n";
      }
    }
    if (!r.first_error.empty()) out += "  first error: " + r.first_error + "\n";
  }
  const auto ratios = ratios_to_baseline(runs), steady = ratios_to_baseline(runs, true);
  if (!ratios.empty() && ratios.front().ratios.size() > 1) {
    out += "x base over " + std::to_string(ratios.front().ratios.size()) +
           " rounds (each against its own round's baseline; steady: while every client was busy):\n";
    auto spread = [](const RatioSummary& q) {
      return "median " + fmt("%.2f", q.median) + ", range " + fmt("%.2f", q.min) + "-" + fmt("%.2f", q.max);
    };
    for (const auto& q : ratios) {
      out += "  " + q.label + ": " + spread(q);
      for (const auto& s : steady) {
        if (s.label == q.label) out += "; steady: " + spread(s);
      }
      out += "\n";
    }
  }
  return out;
}

json Loadgen::report_json(const std::vector<RunReport>& runs) const {
  auto ratio_json = [&](bool steady) {
    nlohmann::json ratios = nlohmann::json::object();
    for (const auto& q : ratios_to_baseline(runs, steady))
      ratios[q.label] = {{"median", q.median}, {"min", q.min}, {"max", q.max}, {"per_round", q.ratios}};
    return ratios;
  };
  auto sum = [](const Summary& s) {
    return nlohmann::json{{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean}};
  };
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json j = {{"label", r.label},
                        {"round", r.round + 1},
                        {"rate", std::isfinite(r.rate) ? nlohmann::json(r.rate) : nlohmann::json("inf")},
                        {"concurrency", r.concurrency},
                        {"requests", r.requests},
                        {"completed", r.completed},
                        {"failed", r.failed},
                        {"duration_s", r.duration_s},
                        {"requests_per_s", r.requests_per_s},
                        {"output_tokens_per_s", r.output_tokens_per_s},
                        {"input_tokens_per_s", r.input_tokens_per_s},
                        {"ttft_ms", sum(r.ttft_ms)},
                        {"tpot_ms", sum(r.tpot_ms)},
                        {"e2e_s", sum(r.e2e_s)}};
    if (const auto q = ratio_to_baseline(runs, r, false)) j["output_tokens_per_s_vs_baseline"] = *q;
    if (r.steady_output_tokens_per_s > 0) {
      j["steady_window_s"] = r.steady_window_s;
      j["steady_output_tokens_per_s"] = r.steady_output_tokens_per_s;
      if (const auto q = ratio_to_baseline(runs, r, true)) j["steady_output_tokens_per_s_vs_baseline"] = *q;
    }
    j["prompt_tokens"] = r.prompt_tokens;
    if (r.cached_prompt_tokens >= 0) j["cached_prompt_tokens"] = r.cached_prompt_tokens;
    if (cfg_.turns > 1) j["ttft_ms_later_turns"] = sum(r.ttft_follow_up_ms);
    if (!r.first_error.empty()) j["first_error"] = r.first_error;
    arr.push_back(j);
  }
  return {{"url",
           "http://" + cfg_.endpoint.host + ":" + std::to_string(cfg_.endpoint.port) + cfg_.endpoint.prefix},
          {"model", model_},
          {"requests", cfg_.requests},
          {"prompt_len", {cfg_.prompt_min, cfg_.prompt_max}},
          {"gen_len", {cfg_.gen_min, cfg_.gen_max}},
          {"shared_prefix", cfg_.shared_prefix},
          {"turns", cfg_.turns},
          {"seed", cfg_.seed},
          {"temperature", cfg_.temperature},
          {"rounds", cfg_.rounds},
          {"runs", arr},
          {"vs_baseline", ratio_json(false)},
          {"steady_vs_baseline", ratio_json(true)}};
}

}  // namespace sy
