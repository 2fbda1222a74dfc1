// Offline expert-cache simulation over a trace: each step's demand is, per MoE layer, the
// set of experts that received at least one token; demands are served step by step,
// layers in execution order, each as the tiered store serves a layer: its resident experts
// first, then the missing ones (ascending), and no expert of the running layer is evicted
// while the layer needs it unless every resident one is (ExpertCache::serve_layer; a
// step may need more experts than fit). So a replay's misses are the store's loads without
// prefetch. Belady's MIN (evict the expert whose next demand is furthest) is served the
// same way and is a lower bound on every policy's misses. Every miss loads the expert
// (demand fetch); misses include the cold start (the cache begins empty).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/cache_policy.h"
#include "experts/trace.h"

namespace sy {

struct CacheSimResult {
  std::string policy;
  CacheScope scope = CacheScope::PerLayer;
  int capacity = 0;  // experts per layer (PerLayer) or in all (Global)
  int64_t requests = 0, misses = 0;
  std::vector<int64_t> layer_requests, layer_misses;  // per MoE layer
  double miss_rate() const { return requests ? double(misses) / double(requests) : 0.0; }
};

// Each (step, layer)'s demand, in serving order: units (moe_layer * n_expert + expert),
// ascending within a demand; and all of them in one sequence.
std::vector<std::vector<int>> demand_groups(const Trace& t);
std::vector<int> demand_sequence(const Trace& t);

// policy: "lru", "lfu-decay", "expert-buffering" or "belady".
CacheSimResult simulate_cache(const Trace& t, const std::string& policy, CacheScope scope, int capacity,
                              double lfu_decay = kDefaultLfuDecay);

// Every simulated policy, Belady's MIN last.
std::vector<std::string> simulated_policy_names();

// Miss rate versus cache size for each policy. Sizes are c experts per layer for
// c = 1..n_expert (at most 32 evenly spread points); a Global curve uses c * n_moe
// experts in one pool, so both scopes share the x axis (fraction of all experts).
struct MissCurve {
  CacheScope scope = CacheScope::PerLayer;
  std::vector<int> per_layer;    // c, experts per layer
  std::vector<double> fraction;  // c / n_expert
  std::vector<std::string> policies;
  std::vector<std::vector<CacheSimResult>> results;  // [policy][point]
};
MissCurve miss_curve(const Trace& t, CacheScope scope, double lfu_decay = kDefaultLfuDecay);

const char* scope_name(CacheScope s);

}  // namespace sy
