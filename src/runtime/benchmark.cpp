#include "runtime/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "base/job_profile.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"
#include "model/forward.h"
#include "runtime/bench_run.h"
#include "runtime/sampler.h"

namespace sy {
namespace {

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

using nlohmann::json;

// Where a step's time went, in milliseconds per step.
json split_json(const StepProfile& p) {
  const double k = 1e3 / std::max<int64_t>(1, p.steps);
  return {{"attention", k * p.attention}, {"attention_core", k * p.attention_core}, {"moe", k * p.moe},
          {"dense_ffn_and_shared", k * p.ffn}, {"output", k * p.output}};
}

std::string split_text(const StepProfile& p) {
  const json j = split_json(p);
  auto ms = [&](const char* key) { return std::to_string(j[key].get<double>()) + " ms"; };
  return "attention " + ms("attention") + " (softmax(QK)V " + ms("attention_core") + "), MoE " + ms("moe") +
         ", dense FFN " + ms("dense_ffn_and_shared") + ", output " + ms("output");
}

// Multiply-adds of one token in layer il, excluding attention over the cache; `kv_only`:
// just the K and V projections (a pruned row of the last layer).
double layer_macs(const HParams& h, int il, bool kv_only) {
  const double kv = static_cast<double>(h.n_embd) * (h.k_dim() + h.v_dim());
  if (kv_only) return kv;
  double macs = kv + static_cast<double>(h.n_embd) * (h.q_dim() + int64_t{h.n_head} * h.head_dim_v);
  if (h.layer_is_moe(il)) {
    macs += static_cast<double>(h.n_embd) * h.n_expert;
    macs += 3.0 * h.n_embd * h.n_ff_exp * h.n_expert_used;
    if (h.rules->shared_expert) macs += 3.0 * h.n_embd * h.n_ff_shexp;
  } else {
    macs += 3.0 * h.n_embd * h.n_ff;
  }
  return macs;
}

// Floating-point operations of a prompt of n tokens whose last token alone wants logits:
// every layer for every token, except that the last layer stops the other tokens after
// their K/V projections, and the output head runs once (what Forward computes).
double prefill_flops(const Model& m, int64_t n) {
  const HParams& h = m.hparams();
  double macs = static_cast<double>(h.n_embd) * h.n_vocab;
  for (int il = 0; il < h.n_layer; ++il) {
    const bool last = il == h.n_layer - 1;
    macs += layer_macs(h, il, false) * (last ? 1 : n) + (last ? layer_macs(h, il, true) * (n - 1) : 0.0);
  }
  return 2.0 * macs;
}

double peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

// The dense weights a decode step streams (attention, output head, dense and shared FFNs):
// what the bandwidth probe reads between decode steps, so it needs no buffer of its own.
std::vector<cpu::ByteSpan> dense_weight_spans(const Model& model) {
  std::vector<cpu::ByteSpan> spans;
  auto add = [&](const WeightMatrix& w) {
    if (!w.empty()) spans.push_back({w.data, w.bytes()});
  };
  const ModelWeights& mw = model.weights();
  for (const LayerWeights& l : mw.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.dense.gate, &l.dense.up, &l.dense.down,
                                  &l.shared_expert.gate, &l.shared_expert.up, &l.shared_expert.down}) {
      add(*w);
    }
  }
  add(mw.output);
  return spans;
}

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)), &std::free);
  std::memset(buf.get(), 1, bytes);  // fault every page in before timing
  double best = 0;
  for (int i = 0; i < passes; ++i) {
    const auto t0 = BenchClock::now();
    volatile uint64_t sink = cpu::stream_read(buf.get(), bytes, pool);
    (void)sink;
    best = std::max(best, bytes / seconds_since(t0) / 1e9);
  }
  return best;
}

namespace {

json prefill_figures(const BenchRun& r) {
  const BenchOptions& opt = r.opt;
  r.log("prefill of " + std::to_string(opt.prompt) + " tokens...");
  Forward f(r.model, r.pool, opt.moe);
  KvCache cache = f.make_cache(opt.prompt);
  Batch b;
  const auto toks = random_tokens(opt.prompt, r.model.hparams().n_vocab, 1);
  for (int i = 0; i < opt.prompt; ++i) b.add(toks[i], i, 0, i == opt.prompt - 1);
  std::vector<float> logits;
  f.run(b, cache, logits);  // warm-up: page faults, buffers
  cache.release(0);
  f.reset_profile();
  const auto t0 = BenchClock::now();
  f.run(b, cache, logits);
  const double s = seconds_since(t0);
  const double gflops = prefill_flops(r.model, opt.prompt) / s / 1e9;
  r.log("  prefill: " + std::to_string(opt.prompt / s) + " tokens/s, " + std::to_string(gflops) + " GFLOP/s; " +
        split_text(f.profile()));
  return {{"tokens", opt.prompt}, {"seconds", s}, {"tokens_per_s", opt.prompt / s}, {"gflops", gflops},
          {"time_split_ms", split_json(f.profile())}};
}


// The job profile per step: a row per call site, as JSON and as a table in the log.
json job_profile_figures(const JobProfile& p, int steps, const std::function<void(const std::string&)>& log) {
  json rows = json::array();
  char line[512];
  log("  jobs per step: wall ms | serial ms before | idle ms per thread inside | jobs | site");
  for (const JobProfile::Site& s : p.sites()) {
    const double wall = 1e3 * s.wall_s / steps;
    json idle = json::array();
    std::string idle_text;
    for (double busy : s.busy_s) {
      const double ms = wall - 1e3 * busy / steps;
      idle.push_back(ms);
      char v[32];
      std::snprintf(v, sizeof v, "%s%.3f", idle_text.empty() ? "" : " ", ms);
      idle_text += v;
    }
    rows.push_back({{"site", s.name}, {"jobs", static_cast<double>(s.jobs) / steps},
                    {"tasks", static_cast<double>(s.tasks) / steps}, {"wall_ms", wall},
                    {"serial_before_ms", 1e3 * s.serial_before_s / steps}, {"idle_ms_per_thread", idle}});
    std::snprintf(line, sizeof line, "    %9.3f | %8.3f | %s | %6.1f | %s", wall, 1e3 * s.serial_before_s / steps,
                  idle_text.c_str(), static_cast<double>(s.jobs) / steps, s.name.c_str());
    log(line);
  }
  return rows;
}

// B sequences, each after its own untimed prompt, decoding opt.gen steps together.
json decode_figures(const BenchRun& r, int B) {
  const BenchOptions& opt = r.opt;
  const HParams& h = r.model.hparams();
  r.log("decode with " + std::to_string(B) + " sequence(s)...");
  Forward f(r.model, r.pool, opt.moe);
  KvCache cache = f.make_cache(opt.batch_prompt + opt.gen + 1, B);
  std::vector<float> logits;
  Batch b;
  // Prompts (not timed), one sequence at a time.
  std::vector<int32_t> next(B);
  for (int s = 0; s < B; ++s) {
    b.clear();
    const auto toks = random_tokens(opt.batch_prompt, h.n_vocab, 100 + s);
    for (int i = 0; i < opt.batch_prompt; ++i) b.add(toks[i], i, s, i == opt.batch_prompt - 1);
    f.run(b, cache, logits);
    next[s] = argmax(logits.data(), h.n_vocab);
  }
  double expert_bytes = 0, active = 0;
  f.reset_profile();
  // The store's counters are read inside the timed window, so that the disk's busy time
  // is a share of it.
  const auto t0 = BenchClock::now();
  const StoreCounters before = counters_of(r.tiered);
  std::vector<double> step_seconds, probe_gbps;
  double probe_seconds = 0;
  // Attached around the forward passes only, so the probe's reads are not among the jobs.
  JobProfile jobs(r.pool.size());
  for (int step = 0; step < opt.gen; ++step) {
    const auto ts = BenchClock::now();
    b.clear();
    for (int s = 0; s < B; ++s) b.add(next[s], opt.batch_prompt + step, s, true);
    if (opt.job_profile) {
      jobs.begin_window();
      r.pool.set_profile(&jobs);
    }
    f.run(b, cache, logits);
    r.pool.set_profile(nullptr);
    for (int s = 0; s < B; ++s) next[s] = argmax(logits.data() + static_cast<size_t>(s) * h.n_vocab, h.n_vocab);
    step_seconds.push_back(seconds_since(ts));
    for (const MoeStepStats& st : f.moe_stats()) {
      expert_bytes += static_cast<double>(st.expert_bytes_read);
      active += static_cast<double>(st.active_experts);
    }
    if (r.probe_alongside) {
      const auto tp = BenchClock::now();
      size_t n = 0;
      volatile uint64_t sink = cpu::stream_read(r.probe_spans, r.pool, &n);
      (void)sink;
      const double ps = seconds_since(tp);
      probe_seconds += ps;
      probe_gbps.push_back(n / ps / 1e9);
    }
  }
  const StoreCounters after = counters_of(r.tiered);
  const double s = seconds_since(t0) - probe_seconds;
  const double bytes_per_step = expert_bytes / opt.gen + static_cast<double>(r.model.dense_weight_bytes());
  const double gbps = bytes_per_step * opt.gen / s / 1e9;
  const int moe_layers = h.n_layer - h.n_layer_dense_lead;
  json row = {{"batch", B}, {"steps", opt.gen}, {"seconds", s}, {"tokens_per_s", B * opt.gen / s},
              {"steps_per_s", opt.gen / s}, {"bytes_per_step", bytes_per_step},
              {"active_experts_per_moe_layer", h.is_moe() ? active / opt.gen / moe_layers : 0.0},
              {"achieved_gbps", gbps}, {"percent_of_bandwidth", 100.0 * gbps / r.bw}};
  row["time_split_ms_per_step"] = split_json(f.profile());
  // The median step is steadier than the mean on a shared machine, where a neighbour's
  // burst slows a few steps a lot.
  const double median = median_of(step_seconds);
  row["median_step_ms"] = 1e3 * median;
  row["tokens_per_s_at_median_step"] = B / median;
  std::string alongside;
  if (!probe_gbps.empty()) {
    // Median step against the median probe: both halves of the ratio from the same minute.
    const double bw_now = median_of(probe_gbps), gbps_median = bytes_per_step / median / 1e9;
    row["bandwidth_alongside_gbps"] = bw_now;
    row["achieved_gbps_at_median_step"] = gbps_median;
    row["percent_of_bandwidth_alongside"] = 100.0 * gbps_median / bw_now;
    alongside = "; median step " + std::to_string(gbps_median) + " GB/s against " + std::to_string(bw_now) +
                " GB/s read alongside the steps (" + std::to_string(100.0 * gbps_median / bw_now) + "%)";
  }
  if (r.tiered) row["expert_cache"] = expert_cache_figures(r, before, after, B * opt.gen, s);
  if (opt.job_profile) row["jobs_per_step"] = job_profile_figures(jobs, opt.gen, r.log);
  r.log("  batch " + std::to_string(B) + ": " + std::to_string(B * opt.gen / s) + " tokens/s (" +
        std::to_string(B / median) + " at the median step), " + std::to_string(bytes_per_step / 1e9) +
        " GB touched per step, " + std::to_string(gbps) + " GB/s (" + std::to_string(100.0 * gbps / r.bw) +
        "% of measured bandwidth)" + alongside + "; per step: " + split_text(f.profile()));
  return row;
}

// Each batch's decode throughput against one sequence's, when both ran: what batching buys
// (taken minutes apart at most, in one run; on a shared machine the memory's speed drifts).
void compare_with_batch_1(const BenchRun& r, json& out) {
  if (!out.contains("decode")) return;
  const json* one = nullptr;
  for (const json& row : out["decode"])
    if (row["batch"] == 1) one = &row;
  if (!one) return;
  const double base = (*one)["tokens_per_s"].get<double>();
  std::string text;
  for (json& row : out["decode"]) {
    if (row["batch"] == 1) continue;
    const double x = row["tokens_per_s"].get<double>() / base;
    row["tokens_per_s_vs_batch_1"] = x;
    char part[64];
    std::snprintf(part, sizeof part, "%sbatch %d %.2fx", text.empty() ? "" : ", ", row["batch"].get<int>(), x);
    text += part;
  }
  if (!text.empty()) r.log("decode tokens/s against batch 1: " + text);
}

// One MoE layer on the same hidden states with dynamic gating and with static gating at
// each capacity factor.
json gating_figures(const BenchRun& r) {
  const HParams& h = r.model.hparams();
  const int layer = h.n_layer_dense_lead;
  const int64_t n = r.opt.prompt > 0 ? r.opt.prompt : 512;
  r.log("MoE layer " + std::to_string(layer) + " on " + std::to_string(n) + " tokens: dynamic vs static gating...");
  std::vector<float> x(static_cast<size_t>(n * h.n_embd)), y(x.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  const RouterRules rules = router_rules(h);
  const WeightMatrix& router = r.model.weights().layers[layer].router;
  auto time_mode = [&](MoeOptions mo, MoeStepStats& st) {
    MoeLayer moe;
    CpuBackend backend(r.pool);
    st = moe.forward(x.data(), n, h.n_embd, router, rules, r.model.experts(), layer, mo, y.data(), h.n_embd, backend, r.pool);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = BenchClock::now();
      st = moe.forward(x.data(), n, h.n_embd, router, rules, r.model.experts(), layer, mo, y.data(), h.n_embd, backend, r.pool);
      best = std::min(best, seconds_since(t0));
    }
    return best;
  };
  MoeStepStats st;
  const double dyn = time_mode({GatingMode::Dynamic, 1.0}, st);
  json moe = {{"layer", layer}, {"tokens", n}, {"n_expert", h.n_expert}, {"k", h.n_expert_used},
              {"dynamic", {{"seconds", dyn}, {"rows_computed", st.rows_computed}, {"active_experts", st.active_experts}}}};
  r.log("  dynamic: " + std::to_string(dyn * 1e3) + " ms (" + std::to_string(st.rows_computed) + " expert rows)");
  for (double cf : r.opt.capacity_factors) {
    const double t = time_mode({GatingMode::Static, cf}, st);
    moe["static"].push_back({{"capacity_factor", cf}, {"seconds", t}, {"rows_computed", st.rows_computed},
                             {"dropped", st.dropped}, {"dynamic_speedup", t / dyn}});
    r.log("  static cf " + std::to_string(cf) + ": " + std::to_string(t * 1e3) + " ms (" + std::to_string(st.rows_computed) +
          " rows incl. padding, " + std::to_string(st.dropped) + " assignments dropped), dynamic is " +
          std::to_string(t / dyn) + "x faster");
  }
  return moe;
}


}  // namespace

nlohmann::json run_benchmark(const Model& model, const BenchOptions& opt, const BenchLog& log) {
  const HParams& h = model.hparams();
  ThreadPool pool(opt.threads > 0 ? opt.threads : ThreadPool::default_threads());
  BenchRun r{model, opt, pool, log, 0.0, nullptr, 0.0, 0.0, 0.0, 0.0, {}, {}, false};
  json out;
  out["model"] = {{"file", model.file().path()}, {"architecture", h.arch_name}, {"file_bytes", model.file().file_size()},
                  {"n_layer", h.n_layer}, {"n_embd", h.n_embd}, {"n_expert", h.n_expert}, {"n_expert_used", h.n_expert_used}};
  out["threads"] = pool.size();
  out["moe_gating"] = {{"mode", opt.moe.gating == GatingMode::Static ? "static" : "dynamic"}};
  if (opt.moe.gating == GatingMode::Static) out["moe_gating"]["capacity_factor"] = opt.moe.capacity_factor;
  out["kernels"] = {{"dot", cpu::dot_kernels().isa}, {"packed", cpu::packed_kernels().isa}};

  double bw1 = opt.bandwidth_1;
  r.bw = opt.bandwidth_all;
  if (r.bw <= 0) {
    log("measuring memory read bandwidth...");
    ThreadPool one(1);
    bw1 = measure_read_bandwidth(one, opt.bandwidth_bytes);
    r.bw = measure_read_bandwidth(pool, opt.bandwidth_bytes);
  }
  out["bandwidth_gbps"] = {{"threads_1", bw1}, {"threads_all", r.bw}};
  log("  read bandwidth: " + std::to_string(bw1) + " GB/s (1 thread), " + std::to_string(r.bw) + " GB/s (" +
      std::to_string(pool.size()) + " threads)");

  r.tiered = model.tiered_experts();
  if (r.tiered) probe_disk(r, out);

  out["dense_weight_bytes_per_step"] = model.dense_weight_bytes();
  // The VM's bandwidth drifts by up to 2x within a minute, so a probe taken once before
  // decoding can be far from what the steps had. One probe pass after every decode step
  // (untimed) over the dense weights gives the bandwidth alongside them, if those weights
  // are large enough not to be served from cache (opt.alongside_min_bytes).
  r.probe_spans = dense_weight_spans(model);
  size_t probe_bytes = 0;
  for (const auto& sp : r.probe_spans) probe_bytes += sp.bytes;
  r.probe_alongside = probe_bytes >= opt.alongside_min_bytes && !r.tiered;

  if (!opt.skip_prefill && opt.prompt > 0) out["prefill"] = prefill_figures(r);
  for (int B : opt.batches) out["decode"].push_back(decode_figures(r, B));
  compare_with_batch_1(r, out);
  if (r.tiered && !opt.batches.empty()) bracket_disk_bound(r, out);
  if (!opt.skip_moe && h.is_moe()) out["moe_layer"] = gating_figures(r);

  // Model file + the largest KV cache used (the batched decode) for comparison.
  size_t kv = 0;
  const size_t kv_pos = KvCache::position_bytes(model.kv_type(), h.n_layer, h.k_dim(), h.v_dim());
  for (int B : opt.batches) kv = std::max(kv, static_cast<size_t>(B) * (opt.batch_prompt + opt.gen + 1) * kv_pos);
  kv = std::max(kv, static_cast<size_t>(opt.prompt) * kv_pos);
  out["peak_rss_bytes"] = peak_rss_bytes();
  out["file_plus_kv_bytes"] = static_cast<double>(model.file().file_size() + kv);
  return out;
}

}  // namespace sy
