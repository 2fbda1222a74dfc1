// `switchyard bench` with an expert cache: the disk probes (one stream, four, and the
// store's own pattern of reads, before and after the decode) and the cache's figures.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <numeric>
#include <random>

#include "base/weight_arena.h"
#include "experts/cache_use.h"
#include "runtime/bench_run.h"

namespace sy {

using json = nlohmann::json;

double measure_direct_read_bandwidth(const std::string& path, size_t bytes, int io_threads) {
  const size_t chunk = size_t{4} << 20;
  std::ifstream probe(path, std::ios::binary | std::ios::ate);
  const size_t file = static_cast<size_t>(probe.tellg());
  std::vector<FileRange> reads;
  for (size_t off = 0; off + chunk <= std::min(bytes, file); off += chunk) reads.push_back({off, chunk});
  return measure_direct_read_bandwidth(path, reads, io_threads);
}

double measure_direct_read_bandwidth(const std::string& path, const std::vector<FileRange>& reads,
                                     int io_threads, ReadDelivery delivery) {
  if (reads.empty()) return 0;
  DirectReader reader(path, io_threads, delivery.bounce_bytes);
  size_t longest = 0, total = 0;
  for (const FileRange& r : reads) longest = std::max(longest, r.len), total += r.len;
  WeightArena arena;
  const int per = std::max(1, delivery.buffers_per_thread);
  std::vector<uint8_t*> bufs;
  for (int i = 0; i < io_threads * per; ++i) {
    uint8_t* b = arena.allocate(DirectReader::span_bytes(longest), DirectReader::kAlign);
    touch_pages(b, DirectReader::span_bytes(longest));  // as the store's prefaulted slots
    bufs.push_back(b);
  }
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = io_threads;
  const auto t0 = BenchClock::now();
  for (int i = 0; i < io_threads; ++i) {
    reader.submit([&, i] {
      size_t n = 0;
      for (size_t k; (k = next.fetch_add(1)) < reads.size();)
        reader.read(bufs[i * per + n++ % per], reads[k].offset, reads[k].len);
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return running == 0; });
  return total / seconds_since(t0) / 1e9;
}

namespace {

// Where the loads' time went: how much of the decode the disk had a read to serve, how
// many reads it had at once, and what came before (the I/O queue) and after (the repack)
// each read.
json io_figures(const BenchRun& r, const ReadStats& before, const ReadStats& a, double pack_seconds,
                double tokens, double seconds) {
  const double reads = std::max<int64_t>(1, a.reads - before.reads),
               busy = a.busy_seconds - before.busy_seconds;
  const double read_s = a.read_seconds - before.read_seconds, copy_s = a.copy_seconds - before.copy_seconds;
  const double queued = std::max<int64_t>(1, a.queued - before.queued);
  const double queue_ms = 1e3 * (a.queue_seconds - before.queue_seconds) / queued;
  r.log("    I/O: the disk had a read in flight " + std::to_string(100.0 * busy / seconds) +
        "% of the time, " + std::to_string(busy > 0 ? read_s / busy : 0.0) +
        " at once on average then; a read took " + std::to_string(1e3 * read_s / reads) + " ms (" +
        std::to_string(1e3 * copy_s / reads) + " of them copying out of the bounce buffer) after " +
        std::to_string(queue_ms) + " ms queued; repacking " + std::to_string(1e3 * pack_seconds / tokens) +
        " ms per token" + (pack_seconds > 0 ? " (a copy written by `switchyard pack` needs none)" : ""));
  return {{"disk_busy_fraction", busy / seconds},
          {"reads_in_flight_while_busy", busy > 0 ? read_s / busy : 0.0},
          {"read_ms_mean", 1e3 * read_s / reads},
          {"copy_ms_mean", 1e3 * copy_s / reads},
          {"queue_ms_mean", queue_ms},
          {"pack_ms_per_token", 1e3 * pack_seconds / tokens}};
}

}  // namespace

ReadDelivery store_delivery(const TieredExpertStore& t) { return {t.bounce_bytes(), 4}; }

StoreCounters counters_of(const TieredExpertStore* t) {
  return t ? StoreCounters{t->stats(), t->read_stats()} : StoreCounters{};
}

void probe_disk(BenchRun& r, json& out) {
  const Model& model = r.model;
  const BenchLog& log = r.log;
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
  r.disk_bw_delivered = measure_direct_read_bandwidth(model.file().path(), reads, r.tiered->io_threads(),
                                                      store_delivery(*r.tiered));
  r.expert_probe = std::move(reads);
  const double on_huge_pages = r.tiered->slot_huge_page_fraction();
  out["expert_cache"] = {{"slots", r.tiered->capacity()},
                         {"policy", r.tiered->policy_name()},
                         {"direct_io", r.tiered->direct_io()},
                         {"prefetch_layers", model.prefetch_layers()},
                         {"prefetch_layers_follow_misses", model.prefetch_layers_follow_misses()},
                         {"disk_read_gbps", r.disk_bw},
                         {"disk_read_gbps_one_stream", r.disk_bw1},
                         {"disk_read_gbps_expert_reads", r.disk_bw_experts},
                         {"disk_read_gbps_expert_reads_delivered", r.disk_bw_delivered},
                         {"slots_on_huge_pages", on_huge_pages}};
  const std::vector<int>& pins = r.tiered->profile_pins();
  std::string pinned;
  if (!pins.empty()) {
    out["expert_cache"]["profile_pins_per_layer"] = pins;
    pinned = ", " + std::to_string(std::accumulate(pins.begin(), pins.end(), 0)) + " pinned from the profile";
  }
  log("  direct read: " + std::to_string(r.disk_bw1) + " GB/s (1 stream), " + std::to_string(r.disk_bw) +
      " GB/s (4 streams), " + std::to_string(r.disk_bw_experts) + " GB/s (expert reads, " +
      std::to_string(r.tiered->io_threads()) + " in flight), " + std::to_string(r.disk_bw_delivered) +
      " GB/s (the same delivered as the store does); cache of " +
      std::to_string(r.tiered->capacity()) + " experts (" +
      (on_huge_pages < 0 ? std::string("huge pages unknown")
                         : std::to_string(static_cast<int>(100 * on_huge_pages)) + "% on huge pages") +
      "), policy " + r.tiered->policy_name() + pinned +
      (model.prefetch_layers() == 0 ? std::string(", no prefetch")
       : model.prefetch_layers_follow_misses()
           ? ", prefetch 1-3 layers ahead as the misses go (" + std::to_string(model.prefetch_layers()) +
                 " to start)"
           : ", prefetch " + std::to_string(model.prefetch_layers()) + " layer(s) ahead"));
}

json expert_cache_figures(const BenchRun& r, const StoreCounters& before_all, const StoreCounters& after,
                          double tokens, double seconds) {
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
  const std::string hidden = pre > 0 ? "; prefetch: " + std::to_string(1e3 * pf_hidden / pf_used) + " of " +
                                           std::to_string(1e3 * pf_latency / pf_used) +
                                           " ms of load latency hidden per prefetched expert used"
                                     : std::string();
  r.log("    expert cache: hit rate " + std::to_string(use.hit_rate()) + " (+" +
        std::to_string(use.prefetched_rate()) + " prefetched), " + std::to_string(per_token / 1e6) +
        " MB read per token at " + std::to_string(read / seconds / 1e9) + " GB/s (disk bound " +
        std::to_string(disk_bound_tps) + " tokens/s)" + hidden);
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
              {"prefetch_layers_at_end", r.model.prefetch_layers()},
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

void bracket_disk_bound(BenchRun& r, json& out) {
  const std::string& path = r.model.file().path();
  const int io = r.tiered->io_threads();
  const double after = measure_direct_read_bandwidth(path, r.expert_probe, io);
  const double after_delivered =
      measure_direct_read_bandwidth(path, r.expert_probe, io, store_delivery(*r.tiered));
  const double mean = 0.5 * (r.disk_bw_experts + after),
               mean_delivered = 0.5 * (r.disk_bw_delivered + after_delivered);
  out["expert_cache"]["disk_read_gbps_expert_reads_after"] = after;
  out["expert_cache"]["disk_read_gbps_expert_reads_delivered_after"] = after_delivered;
  r.log("  direct read after the decode: " + std::to_string(after) + " GB/s (expert reads; before: " +
        std::to_string(r.disk_bw_experts) + "), " + std::to_string(after_delivered) +
        " GB/s (delivered as the store does; before: " + std::to_string(r.disk_bw_delivered) + ")");
  for (json& d : out["decode"]) {
    if (!d.contains("expert_cache")) continue;
    json& c = d["expert_cache"];
    const double per_token = c["bytes_read_per_token"], tps = d["tokens_per_s"];
    auto percent = [&](double gbps) {
      return per_token > 0 && gbps > 0 ? 100.0 * tps * per_token / (gbps * 1e9) : 0.0;
    };
    c["percent_of_disk_bound_expert_reads_bracketed"] = percent(mean);
    c["percent_of_disk_bound_expert_reads_delivered_bracketed"] = percent(mean_delivered);
    r.log("    batch " + std::to_string(d["batch"].get<int>()) + ": " +
          std::to_string(c["percent_of_disk_bound_expert_reads_bracketed"].get<double>()) +
          "% of the disk bound at the expert reads' mean rate before and after, " +
          std::to_string(c["percent_of_disk_bound_expert_reads_delivered_bracketed"].get<double>()) +
          "% at the delivered reads' mean rate");
  }
}

}  // namespace sy
