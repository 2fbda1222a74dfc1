// `switchyard bench`: this machine's memory read bandwidth, then prefill and decode speed
// of a model with the exact weight bytes each decode step touched (from the dispatch
// plans), and the MoE layer with dynamic versus static gating on the same tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experts/direct_reader.h"
#include "model/model.h"
#include "moe/moe_layer.h"

namespace sy {

struct BenchOptions {
  std::vector<int> batches = {1};  // decode batch sizes (concurrent sequences)
  int prompt = 512;                // prefill length
  int gen = 32;                    // decode steps per batch size
  int batch_prompt = 128;          // prompt of each sequence before batched decode
  int threads = 0;
  // Gating of the prefill and decode runs (`--moe-gating`, `--capacity-factor`); the gating
  // comparison times both modes whatever this says.
  MoeOptions moe;
  size_t bandwidth_bytes = size_t{1} << 30;
  // Dense weights (attention, head) needed to run the probe alongside the decode steps:
  // under ~4x the LLC it would measure the cache.
  size_t alongside_min_bytes = size_t{128} << 20;
  std::vector<double> capacity_factors = {1.0, 2.0};
  bool skip_prefill = false;
  bool skip_moe = false;
  // Time every thread-pool job of the decode steps, grouped by the code that starts it.
  bool job_profile = false;
  // Read bandwidth measured before the model was loaded (so the probe buffer does not
  // count in the model's peak memory); 0: measure inside run_benchmark.
  double bandwidth_1 = 0, bandwidth_all = 0;
};

// Multi-threaded read bandwidth (GB/s) of a buffer far larger than the last-level cache,
// best of several passes.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes = 5);

// Direct-I/O read bandwidth (GB/s) of up to `bytes` of `path` read from its start in 4 MiB
// chunks, `io_threads` reads in flight.
double measure_direct_read_bandwidth(const std::string& path, size_t bytes, int io_threads);
// Where a probe's reads land. The default: one buffer per I/O thread that nothing else
// touches. `bounce_bytes` > 0 reads through I/O-thread bounce buffers of that size, as the
// expert store does, and copies into the next of `buffers_per_thread` buffers: on the
// virtio disks measured here the bytes' copy, or any use of them, slows the disk's reads
// by 20-25% (docs/journal/expert-buffering.md, forty-fifth session), so only this probe
// tells what the disk gives reads whose bytes are then used.
struct ReadDelivery {
  size_t bounce_bytes = 0;
  int buffers_per_thread = 1;
};
// The same over the given reads (taken in order, `io_threads` in flight).
double measure_direct_read_bandwidth(const std::string& path, const std::vector<FileRange>& reads,
                                     int io_threads, ReadDelivery delivery = {});

// Runs everything and returns the figures as JSON; `log` gets progress lines.
nlohmann::json run_benchmark(const Model& model, const BenchOptions& opt,
                             const std::function<void(const std::string&)>& log);

}  // namespace sy
