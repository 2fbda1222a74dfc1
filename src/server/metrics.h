// /metrics: the engine's counters, gauges and histograms plus HTTP request counts, in the
// Prometheus text exposition format (version 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "experts/tiered_expert_store.h"
#include "runtime/engine_stats.h"

namespace sy {

class HttpMetrics {
 public:
  void record(const std::string& route, int status);
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;  // (route, status) -> requests
};

struct ServerInfo {
  std::string model_id;
  int parallel = 0;
  int64_t ctx_size = 0;
  size_t max_queue = 0;
  double uptime_seconds = 0;
  int64_t http_threads = -1, http_threads_limit = -1;  // -1: not listening
};

// The expert cache of a model served with --expert-cache.
struct ExpertCacheInfo {
  std::string policy;
  int slots = 0;
  ExpertStoreStats stats;
};

// `cache`: null when every expert is resident (no expert cache metrics then).
std::string render_metrics(const EngineStatsData& e,
                           const std::map<std::pair<std::string, int>, uint64_t>& http,
                           const ServerInfo& info, const ExpertCacheInfo* cache = nullptr);

}  // namespace sy
