// What the serving engine counts, for /metrics: counters, gauges and latency histograms.
// The engine thread updates it once per step under one mutex; readers take a snapshot.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace sy {

// A histogram with fixed upper bounds (Prometheus "le" buckets, +Inf implied).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket, not cumulative; one more than bounds (+Inf)
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) ++i;
    counts[i]++;
    sum += v;
    count++;
  }
};

struct MoeLayerStats {
  bool moe = false;
  uint64_t routed_tokens = 0;      // tokens through the layer
  uint64_t active_experts = 0;     // summed over steps: experts that got at least one token
  uint64_t expert_bytes_read = 0;  // expert weight bytes read
  int64_t last_active = 0;         // active experts in the last step
};

struct EngineStatsData {
  // Counters.
  uint64_t requests_submitted = 0;
  uint64_t requests_rejected = 0;  // refused for a full queue, one per choice
  uint64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens of admitted requests (first admission)
  uint64_t generated_tokens = 0;
  uint64_t computed_tokens = 0;  // tokens through the model, recomputation included
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t reused_tokens = 0;  // prompt tokens whose K/V came from a shared prefix instead of the model
  double busy_seconds = 0.0;   // time inside forward passes
  // Gauges.
  int64_t queue_depth = 0;  // waiting requests, not yet in the batch
  int64_t running = 0;      // sequences in the running batch
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_block_size = 0;
  int64_t kv_blocks_cached = 0;  // prefix blocks no request holds, kept until the pool needs them
  int64_t last_batch_tokens = 0;
  // Histograms (seconds; batch sizes in tokens).
  Histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 20, 40}};
  Histogram tpot{
      {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}};
  Histogram e2e{{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300}};
  Histogram queue_time{{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram batch_tokens{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}};
  std::vector<MoeLayerStats> layers;
  int n_expert = 0;
  std::vector<uint64_t> expert_tokens;  // tokens routed to each (layer, expert), layer-major
};

class EngineStats {
 public:
  EngineStatsData snapshot() const {
    std::lock_guard lock(mu_);
    return data_;
  }
  template <class F>
  void update(F&& f) {
    std::lock_guard lock(mu_);
    f(data_);
  }

 private:
  mutable std::mutex mu_;
  EngineStatsData data_;
};

}  // namespace sy
