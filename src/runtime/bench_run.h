// What the parts of `switchyard bench` share: the run's inputs and probes
// (runtime/benchmark.cpp), and the expert cache's disk probes and figures
// (runtime/bench_expert_cache.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "experts/direct_reader.h"
#include "experts/tiered_expert_store.h"
#include "kernels/cpu/stream_read.h"
#include "model/model.h"
#include "runtime/benchmark.h"

namespace sy {

using BenchLog = std::function<void(const std::string&)>;
using BenchClock = std::chrono::steady_clock;
inline double seconds_since(BenchClock::time_point t0) {
  return std::chrono::duration<double>(BenchClock::now() - t0).count();
}

// What every part of a benchmark run reads.
struct BenchRun {
  const Model& model;
  const BenchOptions& opt;
  ThreadPool& pool;
  const BenchLog& log;
  double bw = 0;  // read bandwidth of all threads, GB/s
  TieredExpertStore* tiered = nullptr;
  double disk_bw = 0, disk_bw1 = 0;     // direct reads of the file: 4 streams, 1 stream
  double disk_bw_experts = 0;           // the store's own reads: expert matrices in random order
  double disk_bw_delivered = 0;         // the same delivered as the store does (store_delivery())
  std::vector<FileRange> expert_probe;  // those reads, probed again after the decode
  // The dense weights a decode step streams, read again after every step (untimed) for
  // the bandwidth alongside the steps; only when they are too large to sit in cache.
  std::vector<cpu::ByteSpan> probe_spans;
  bool probe_alongside = false;
};

// How the store hands its reads' bytes on: through its I/O threads' bounce buffers (or
// none) into slot-like buffers, a few per I/O thread.
ReadDelivery store_delivery(const TieredExpertStore& t);

// The expert store's counters and its reader's, taken together.
struct StoreCounters {
  ExpertStoreStats store;
  ReadStats io;
};
StoreCounters counters_of(const TieredExpertStore* t);

// Probes the disk before the decode (one stream, 4 streams, the store's own reads) and
// records them and the cache's settings in out["expert_cache"].
void probe_disk(BenchRun& r, nlohmann::json& out);
// The expert cache's figures over `tokens` decoded in `seconds`, from the store's counters
// before and after.
nlohmann::json expert_cache_figures(const BenchRun& r, const StoreCounters& before,
                                    const StoreCounters& after, double tokens, double seconds);
// Probes the store's reads again after the decode and gives each decode's share of the
// disk bound against the mean of the probes before and after.
void bracket_disk_bound(BenchRun& r, nlohmann::json& out);

}  // namespace sy
