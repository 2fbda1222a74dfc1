#include "runtime/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <numeric>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "base/job_profile.h"
#include "experts/cache_use.h"
#include "experts/direct_reader.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/stream_read.h"
#include "model/forward.h"
#include "runtime/sampler.h"

namespace sy {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
    const auto t0 = Clock::now();
    volatile uint64_t sink = cpu::stream_read(buf.get(), bytes, pool);
    (void)sink;
    best = std::max(best, bytes / seconds_since(t0) / 1e9);
  }
  return best;
}

double measure_direct_read_bandwidth(const std::string& path, size_t bytes, int io_threads) {
  const size_t chunk = size_t{4} << 20;
  std::ifstream probe(path, std::ios::binary | std::ios::ate);
  const size_t file = static_cast<size_t>(probe.tellg());
  std::vector<FileRange> reads;
  for (size_t off = 0; off + chunk <= std::min(bytes, file); off += chunk) reads.push_back({off, chunk});
  return measure_direct_read_bandwidth(path, reads, io_threads);
}

double measure_direct_read_bandwidth(const std::string& path, const std::vector<FileRange>& reads, int io_threads) {
  if (reads.empty()) return 0;
  DirectReader reader(path, io_threads);
  size_t longest = 0, total = 0;
  for (const FileRange& r : reads) longest = std::max(longest, r.len), total += r.len;
  WeightArena arena;
  std::vector<uint8_t*> bufs;
  for (int i = 0; i < io_threads; ++i) bufs.push_back(arena.allocate(DirectReader::span_bytes(longest), DirectReader::kAlign));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = io_threads;
  const auto t0 = Clock::now();
  for (int i = 0; i < io_threads; ++i) {
    reader.submit([&, i] {
      for (size_t k; (k = next.fetch_add(1)) < reads.size();) reader.read(bufs[i], reads[k].offset, reads[k].len);
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return running == 0; });
  return total / seconds_since(t0) / 1e9;
}

namespace {

using Log = std::function<void(const std::string&)>;

// What every part of a benchmark run reads.
struct BenchRun {
  const Model& model;
  const BenchOptions& opt;
  ThreadPool& pool;
  const Log& log;
  double bw = 0;                    // read bandwidth of all threads, GB/s
  TieredExpertStore* tiered = nullptr;
  double disk_bw = 0, disk_bw1 = 0;  // direct reads of the file: 4 streams, 1 stream
  double disk_bw_experts = 0;        // the store's own reads: expert matrices in random order
  std::vector<FileRange> expert_probe;  // those reads, probed again after the decode
  // The dense weights a decode step streams, read again after every step (untimed) for
  // the bandwidth alongside the steps; only when they are too large to sit in cache.
  std::vector<cpu::ByteSpan> probe_spans;
  bool probe_alongside = false;
};

json prefill_figures(const BenchRun& r) {
  const BenchOptions& opt = r.opt;
  r.log("prefill of " + std::to_string(opt.prompt) + " tokens...");
  Forward f(r.model, r.pool);
  KvCache cache = f.make_cache(opt.prompt);
  Batch b;
  const auto toks = random_tokens(opt.prompt, r.model.hparams().n_vocab, 1);
  for (int i = 0; i < opt.prompt; ++i) b.add(toks[i], i, 0, i == opt.prompt - 1);
  std::vector<float> logits;
  f.run(b, cache, logits);  // warm-up: page faults, buffers
  cache.release(0);
  f.reset_profile();
  const auto t0 = Clock::now();
  f.run(b, cache, logits);
  const double s = seconds_since(t0);
  const double gflops = prefill_flops(r.model, opt.prompt) / s / 1e9;
  r.log("  prefill: " + std::to_string(opt.prompt / s) + " tokens/s, " + std::to_string(gflops) + " GFLOP/s; " +
        split_text(f.profile()));
  return {{"tokens", opt.prompt}, {"seconds", s}, {"tokens_per_s", opt.prompt / s}, {"gflops", gflops},
          {"time_split_ms", split_json(f.profile())}};
}

// The expert store's counters and its reader's, taken together.
struct StoreCounters {
  ExpertStoreStats store;
  ReadStats io;
};

StoreCounters counters_of(const TieredExpertStore* t) { return t ? StoreCounters{t->stats(), t->read_stats()} : StoreCounters{}; }

// Where the loads' time went: how much of the decode the disk had a read to serve, how
// many reads it had at once, and what came before (the I/O queue) and after (the repack)
// each read.
json io_figures(const BenchRun& r, const ReadStats& before, const ReadStats& a, double pack_seconds, double tokens,
                double seconds) {
  const double reads = std::max<int64_t>(1, a.reads - before.reads), busy = a.busy_seconds - before.busy_seconds;
  const double read_s = a.read_seconds - before.read_seconds;
  const double queued = std::max<int64_t>(1, a.queued - before.queued);
  const double queue_ms = 1e3 * (a.queue_seconds - before.queue_seconds) / queued;
  r.log("    I/O: the disk had a read in flight " + std::to_string(100.0 * busy / seconds) + "% of the time, " +
        std::to_string(busy > 0 ? read_s / busy : 0.0) + " at once on average then; a read took " +
        std::to_string(1e3 * read_s / reads) + " ms after " + std::to_string(queue_ms) + " ms queued; repacking " +
        std::to_string(1e3 * pack_seconds / tokens) + " ms per token" +
        (pack_seconds > 0 ? " (a copy written by `switchyard pack` needs none)" : ""));
  return {{"disk_busy_fraction", busy / seconds},
          {"reads_in_flight_while_busy", busy > 0 ? read_s / busy : 0.0},
          {"read_ms_mean", 1e3 * read_s / reads},
          {"queue_ms_mean", queue_ms},
          {"pack_ms_per_token", 1e3 * pack_seconds / tokens}};
}

// The expert cache's figures over `tokens` decoded in `seconds`, from the store's counters
// before and after.
json expert_cache_figures(const BenchRun& r, const StoreCounters& before_all, const StoreCounters& after, double tokens,
                          double seconds) {
  const ExpertStoreStats& before = before_all.store;
  const ExpertStoreStats& a = after.store;
  const ExpertCacheUse use = expert_cache_use(before, a);
  const double pre = use.prefetched, read = use.bytes_read;
  const double per_token = read / tokens;
  // Tokens/s if every missed byte came at `gbps` and nothing else took time.
  auto disk_bound = [&](double gbps) { return per_token > 0 ? gbps * 1e9 / per_token : 0.0; };
  auto percent_of = [&](double bound) { return bound > 0 ? 100.0 * (tokens / seconds) / bound : 0.0; };
  const double disk_bound_tps = disk_bound(r.disk_bw);
  // The miss latency prefetching hid: of the used prefetches' load times (issue to ready),
  // what the compute did not wait for.
  const double pf_latency = a.prefetch_latency_seconds - before.prefetch_latency_seconds;
  const double pf_hidden = pf_latency - (a.prefetch_wait_seconds - before.prefetch_wait_seconds);
  const double pf_used = std::max(1.0, pre);
  r.log("    expert cache: hit rate " + std::to_string(use.hit_rate()) + " (+" + std::to_string(use.prefetched_rate()) +
        " prefetched), " + std::to_string(per_token / 1e6) + " MB read per token at " + std::to_string(read / seconds / 1e9) +
        " GB/s (disk bound " + std::to_string(disk_bound_tps) + " tokens/s); prefetch: " +
        std::to_string(1e3 * pf_hidden / pf_used) + " of " + std::to_string(1e3 * pf_latency / pf_used) +
        " ms of load latency hidden per prefetched expert used");
  json io = io_figures(r, before_all.io, after.io, a.pack_seconds - before.pack_seconds, tokens, seconds);
  json out = {{"hit_rate", use.hit_rate()},
            {"prefetched_rate", use.prefetched_rate()},
            {"bytes_read_per_token", per_token},
            {"read_gbps", read / seconds / 1e9},
            {"disk_bound_tokens_per_s", disk_bound_tps},
            {"percent_of_disk_bound", percent_of(disk_bound_tps)},
            // The same against the one-stream rate, the yardstick the issue quotes.
            {"percent_of_disk_bound_one_stream", percent_of(disk_bound(r.disk_bw1))},
            // And against what the disk gives the store's own pattern of reads.
            {"percent_of_disk_bound_expert_reads", percent_of(disk_bound(r.disk_bw_experts))},
            {"prefetch_issued", use.prefetch_issued},
            {"prefetch_used", static_cast<int64_t>(use.prefetched)},
            // Of the experts prefetch loaded, the share the next layer used.
            {"prefetch_accuracy", use.prefetch_accuracy()},
            // Every expert read (on demand or by a prefetch) per expert needed: what an
            // offline policy's miss rate compares with.
            {"load_rate", use.load_rate()},
            {"wait_seconds", use.wait_seconds},
            // Time the compute waited for loads, and the I/O jobs' busy time summed over the
            // I/O threads (loads overlap each other and compute).
            {"wait_ms_per_token", 1e3 * use.wait_seconds / tokens},
            {"io_busy_ms_per_token", 1e3 * (a.read_seconds - before.read_seconds) / tokens},
            {"prefetch_latency_ms_per_use", 1e3 * pf_latency / pf_used},
            {"prefetch_hidden_ms_per_use", 1e3 * pf_hidden / pf_used},
            {"prefetch_hidden_ms_per_token", 1e3 * pf_hidden / tokens},
            {"prefetch_hidden_fraction", pf_latency > 0 ? pf_hidden / pf_latency : 0.0}};
  out.update(io);
  return out;
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
  Forward f(r.model, r.pool);
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
  const auto t0 = Clock::now();
  const StoreCounters before = counters_of(r.tiered);
  std::vector<double> step_seconds, probe_gbps;
  double probe_seconds = 0;
  // Attached around the forward passes only, so the probe's reads are not among the jobs.
  JobProfile jobs(r.pool.size());
  for (int step = 0; step < opt.gen; ++step) {
    const auto ts = Clock::now();
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
      const auto tp = Clock::now();
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
      const auto t0 = Clock::now();
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

// The disk's speed drifts within a minute as much as the memory's: the store's read
// pattern is probed again after the decode, and each decode's share of the disk bound is
// also given against the mean of the probes before and after it.
void bracket_disk_bound(BenchRun& r, json& out) {
  const double after = measure_direct_read_bandwidth(r.model.file().path(), r.expert_probe, r.tiered->io_threads());
  const double mean = 0.5 * (r.disk_bw_experts + after);
  out["expert_cache"]["disk_read_gbps_expert_reads_after"] = after;
  r.log("  direct read after the decode: " + std::to_string(after) + " GB/s (expert reads; before: " +
        std::to_string(r.disk_bw_experts) + ")");
  for (json& d : out["decode"]) {
    if (!d.contains("expert_cache")) continue;
    json& c = d["expert_cache"];
    const double per_token = c["bytes_read_per_token"], tps = d["tokens_per_s"];
    const double bound = per_token > 0 ? mean * 1e9 / per_token : 0.0;
    c["percent_of_disk_bound_expert_reads_bracketed"] = bound > 0 ? 100.0 * tps / bound : 0.0;
    r.log("    batch " + std::to_string(d["batch"].get<int>()) + ": " + std::to_string(c["percent_of_disk_bound_expert_reads_bracketed"].get<double>()) +
          "% of the disk bound at the expert reads' mean rate before and after");
  }
}

}  // namespace

nlohmann::json run_benchmark(const Model& model, const BenchOptions& opt, const Log& log) {
  const HParams& h = model.hparams();
  ThreadPool pool(opt.threads > 0 ? opt.threads : ThreadPool::default_threads());
  BenchRun r{model, opt, pool, log, 0.0, nullptr, 0.0, 0.0, 0.0, {}, {}, false};
  json out;
  out["model"] = {{"file", model.file().path()}, {"architecture", h.arch_name}, {"file_bytes", model.file().file_size()},
                  {"n_layer", h.n_layer}, {"n_embd", h.n_embd}, {"n_expert", h.n_expert}, {"n_expert_used", h.n_expert_used}};
  out["threads"] = pool.size();
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
  if (r.tiered) {
    log("measuring direct-I/O read bandwidth of the model file...");
    // One stream (how the issue quotes this machine's disk) and the store's 4 I/O threads
    // (the stricter bound, behind percent_of_disk_bound).
    r.disk_bw1 = measure_direct_read_bandwidth(model.file().path(), size_t{1} << 30, 1);
    r.disk_bw = measure_direct_read_bandwidth(model.file().path(), size_t{2} << 30, 4);
    // The store's reads: one expert matrix each (about 1 MB for olmoe Q4_0) scattered over
    // the file, as many in flight as it has I/O threads. Random-order, 2 GB at most.
    std::vector<FileRange> reads = r.tiered->expert_reads();
    std::shuffle(reads.begin(), reads.end(), std::mt19937(7));
    size_t sum = 0, keep = 0;
    while (keep < reads.size() && sum < (size_t{2} << 30)) sum += reads[keep++].len;
    reads.resize(keep);
    r.disk_bw_experts = measure_direct_read_bandwidth(model.file().path(), reads, r.tiered->io_threads());
    r.expert_probe = std::move(reads);
    const double on_huge_pages = r.tiered->slot_huge_page_fraction();
    out["expert_cache"] = {{"slots", r.tiered->capacity()}, {"policy", r.tiered->policy_name()},
                           {"direct_io", r.tiered->direct_io()}, {"prefetch_layers", model.prefetch_layers()},
                           {"disk_read_gbps", r.disk_bw}, {"disk_read_gbps_one_stream", r.disk_bw1},
                           {"disk_read_gbps_expert_reads", r.disk_bw_experts},
                           {"slots_on_huge_pages", on_huge_pages}};
    const std::vector<int>& pins = r.tiered->profile_pins();
    std::string pinned;
    if (!pins.empty()) {
      out["expert_cache"]["profile_pins_per_layer"] = pins;
      pinned = ", " + std::to_string(std::accumulate(pins.begin(), pins.end(), 0)) + " pinned from the profile";
    }
    log("  direct read: " + std::to_string(r.disk_bw1) + " GB/s (1 stream), " + std::to_string(r.disk_bw) +
        " GB/s (4 streams), " + std::to_string(r.disk_bw_experts) + " GB/s (expert reads, " +
        std::to_string(r.tiered->io_threads()) + " in flight); cache of " + std::to_string(r.tiered->capacity()) +
        " experts (" +
        (on_huge_pages < 0 ? std::string("huge pages unknown")
                           : std::to_string(static_cast<int>(100 * on_huge_pages)) + "% on huge pages") +
        "), policy " + r.tiered->policy_name() + pinned + ", prefetch " +
        std::to_string(model.prefetch_layers()) + " layer(s) ahead");
  }

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
