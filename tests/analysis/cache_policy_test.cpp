// Cache policies on hand-made traces whose hits and misses are worked out below, and
// Belady's MIN as a lower bound on random traces. Each step's demand is the set of
// experts with tokens; requests go layer by layer, each layer's resident experts first,
// then the missing ones ascending (as the store serves a layer). The LFU examples use a
// decay of 0.9 per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <random>

#include "analysis/cache_sim.h"
#include "base/error.h"
#include "trace_helpers.h"

namespace sy {
namespace {

constexpr double kDecay = 0.9;

std::map<std::string, int64_t> misses(const Trace& t, CacheScope scope, int capacity) {
  std::map<std::string, int64_t> m;
  for (const auto& p : simulated_policy_names()) m[p] = simulate_cache(t, p, scope, capacity, kDecay).misses;
  return m;
}

// Every policy's misses in per-layer pools of `capacity`, against the worked-out counts.
void expect_misses(const Trace& t, int capacity, const std::map<std::string, int64_t>& want) {
  EXPECT_EQ(misses(t, CacheScope::PerLayer, capacity), want);
}

// One layer, experts {0, 1, 2}, capacity 2, and every step needs all three. Served as the
// store serves a layer, the two resident experts hit first and only the third misses
// (evicting one the layer has used: every resident expert is in the batch). S0: 3 cold
// misses; S1 and S2: 2 hits + 1 miss each: 5 misses for every policy, and for MIN, which
// cannot do better (three experts a step through two slots). Served one request at a
// time in expert order instead, LRU and LFU would evict the next expert needed at every
// miss (9 misses, the cyclic-scan failure): an artefact of that order, not of a store.
TEST(AnalysisCachePolicy, BatchLargerThanCache) {
  const Trace t = test::trace_of_sets(3, {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}});
  const auto m = misses(t, CacheScope::PerLayer, 2);
  for (const auto& [policy, n] : m) EXPECT_EQ(n, 5) << policy;
  EXPECT_EQ(simulate_cache(t, "lru", CacheScope::PerLayer, 2).requests, 9);
}

// Capacity 2, steps {1, 2} then {0, 1}. In the second step expert 1 hits first and the
// miss on 0 evicts 2, never 1, which the layer is using: 3 misses for every policy. One
// request at a time in expert order, LRU's miss on 0 would have evicted 1 (then the least
// recent) and missed it again: 4.
TEST(AnalysisCachePolicy, KeepsTheRunningLayersExperts) {
  const Trace t = test::trace_of_sets(3, {{1, 2}, {0, 1}});
  for (const auto& [policy, n] : misses(t, CacheScope::PerLayer, 2)) EXPECT_EQ(n, 3) << policy;
}

// One token per step: 0 | 1 | 2 | 1 | 2 | 1 | 2, capacity 2.
//   LRU: 0 m, 1 m, 2 m (evicts 0, the least recent), then 1 and 2 hit: 3 misses.
//   LFU: at 2, scores 0.9^2 = 0.81 (expert 0) < 0.9 (expert 1): evicts 0: 3 misses.
//   Expert Buffering: at 2, neither resident is in the batch; the last loaded (1) goes.
//        Then 1 m evicts 2, 2 m evicts 1, ...: LIFO thrashes, all 7 miss.
//   EB + LFU: among the experts outside the batch, the lowest score (0): 3 misses.
//   MIN: at 2, expert 0 is never used again: 3 misses.
TEST(AnalysisCachePolicy, LifoThrashesOnAlternation) {
  const Trace t = test::trace_of_sets(3, {{0}, {1}, {2}, {1}, {2}, {1}, {2}});
  expect_misses(t, 2, {{"lru", 3}, {"lfu-decay", 3}, {"expert-buffering", 7}, {"eb-lfu", 3}, {"belady", 3}});
}

// 0 | 0 | 0 | 1 | 2 | 0, capacity 2.
//   LRU: at 2 (step 5), expert 0 (last used at step 3) is older than 1 (step 4): evicted,
//        so the final 0 misses: 0, 1, 2, 0 = 4 misses.
//   LFU: at step 5, 0 scores (1 + 0.9 + 0.81) * 0.81 = 2.195 and 1 scores 0.9: evicts 1;
//        the final 0 hits: 3 misses.
//   Expert Buffering: neither 0 nor 1 is in the batch; 1 was loaded last: evicted: 3.
//   EB + LFU: the lower score among 0 and 1, again 1: 3.   MIN: 1 is never used again: 3.
TEST(AnalysisCachePolicy, FrequencyBeatsRecency) {
  const Trace t = test::trace_of_sets(3, {{0}, {0}, {0}, {1}, {2}, {0}});
  expect_misses(t, 2, {{"lru", 4}, {"lfu-decay", 3}, {"expert-buffering", 3}, {"eb-lfu", 3}, {"belady", 3}});
}

// A batch that covers the cache (a prompt), then single tokens on its two busiest experts.
// Capacity 2; step 0 routes 1 token to expert 0 and 5 each to experts 1 and 2; then
// 1 | 2 | 1 | 2.
//   LFU: 2's miss in step 0 evicts 0 (score 1 against 5; both are in the batch): every
//        later step hits: 3 misses. LRU also evicts 0 (used before 1): 3.
//   EB + LFU: every resident expert is in the batch, so the last loaded (1) goes; step 1
//        misses 1 again (then evicting 0, outside the batch, by frequency): 4.
//   Expert Buffering: step 0 as EB + LFU, then LIFO thrashes 1 and 2: all 7 miss.
//   MIN: 3.
// The store's default is LFU for this: after a prompt it holds the popular experts.
TEST(AnalysisCachePolicy, FrequencyKeepsABatchsBusiestExperts) {
  Trace t;
  t.info = test::small_info(1, 3, 1);
  t.add_step(11, {1, 5, 5});
  for (int e : {1, 2, 1, 2}) {
    std::vector<uint32_t> counts(3, 0);
    counts[e] = 1;
    t.add_step(1, counts);
  }
  expect_misses(t, 2, {{"lru", 3}, {"lfu-decay", 3}, {"expert-buffering", 7}, {"eb-lfu", 4}, {"belady", 3}});
  EXPECT_EQ(std::string(kDefaultCachePolicy), "lfu-decay");
}

// LFU counts tokens: unit 0 served 5 tokens, unit 1 one, later; a third unit evicts
// unit 1 (score 0.9 * 1 against 0.9 * 5). Counting steps would tie them and evict the
// least recently used, unit 0. A prefetch (0 tokens) loads a unit without scoring it:
// the next miss evicts it rather than the unit that was used.
TEST(AnalysisCachePolicy, LfuCountsTokensNotPrefetches) {
  for (const char* name : {"lfu-decay", "eb-lfu"}) {
    ExpertCache cache(1, 4, CacheScope::PerLayer, 2, make_policy(name, 4, kDecay));
    cache.begin_step();
    cache.access(0, 5.0);
    cache.access(1, 1.0);
    cache.begin_step();
    EXPECT_EQ(cache.access(2, 1.0).evicted, 1) << name;

    ExpertCache pre(1, 4, CacheScope::PerLayer, 2, make_policy(name, 4, kDecay));
    pre.begin_step();
    pre.access(0, 1.0);
    pre.access(1, 0.0);  // prefetched, never used
    pre.begin_step();
    EXPECT_EQ(pre.access(2, 1.0).evicted, 1) << name;
  }
}

// Two layers of two experts: layer 0 alternates 0, 1, 0, 1; layer 1 always uses expert 0.
//   One slot per layer: layer 0 misses every step (4), layer 1 only once: 5 misses.
//   One pool of 3 for both layers: only the 3 cold misses.
//   One pool of 2 (LRU), requests 0 2 | 1 2 | 0 2 | 1 2 (units; layer 1's expert 0 is
//   unit 2): 1 evicts 0 (older than 2), 0 evicts 1, 1 evicts 0; 2 always hits: 5 misses.
TEST(AnalysisCachePolicy, PerLayerAndGlobalPools) {
  const Trace t = test::trace_of_layered_sets(2, {{{0}, {0}}, {{1}, {0}}, {{0}, {0}}, {{1}, {0}}});
  const CacheSimResult per_layer = simulate_cache(t, "lru", CacheScope::PerLayer, 1);
  EXPECT_EQ(per_layer.misses, 5);
  EXPECT_EQ(per_layer.layer_misses, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(per_layer.layer_requests, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(simulate_cache(t, "lru", CacheScope::Global, 3).misses, 3);
  EXPECT_EQ(simulate_cache(t, "lru", CacheScope::Global, 2).misses, 5);
  for (const auto& p : simulated_policy_names())
    EXPECT_EQ(simulate_cache(t, p, CacheScope::Global, 4).misses, 3) << p;
}

TEST(AnalysisCachePolicy, ResidencyNeverExceedsCapacity) {
  const Trace t = test::random_trace(11, 3, 8, 2, 200, 6);
  const auto seq = demand_sequence(t);
  for (const auto& name : online_policy_names()) {
    for (CacheScope scope : {CacheScope::PerLayer, CacheScope::Global}) {
      const int cap = scope == CacheScope::PerLayer ? 3 : 7;
      ExpertCache cache(3, 8, scope, cap, make_policy(name, 24));
      for (int u : seq) {
        const auto a = cache.access(u);
        EXPECT_TRUE(cache.resident(u));
        if (a.evicted >= 0) {
          EXPECT_FALSE(cache.resident(a.evicted));
        }
        int resident = 0, in_layer = 0;
        for (int v = 0; v < 24; ++v) {
          resident += cache.resident(v);
          in_layer += cache.resident(v) && v / 8 == u / 8;
        }
        EXPECT_LE(scope == CacheScope::PerLayer ? in_layer : resident, cap);
      }
    }
  }
  EXPECT_THROW(make_policy("fifo", 4), Error);
  EXPECT_THROW(ExpertCache(1, 4, CacheScope::Global, 0, make_policy("lru", 4)), Error);
}

// The fewest loads any store can make, found by trying every choice: after each demand
// (a mask of experts that must all be resident at once) the store keeps the demand and any
// subset of what it held that fits `capacity`; each demanded expert it did not hold is
// one load.
int64_t exhaustive_min_misses(const std::vector<uint32_t>& demands, int capacity) {
  std::map<uint32_t, int64_t> states = {{0u, 0}};
  for (uint32_t d : demands) {
    std::map<uint32_t, int64_t> next;
    for (const auto& [held, cost] : states) {
      const int64_t c = cost + std::popcount(d & ~held);
      const uint32_t spare = held & ~d;
      for (uint32_t keep = spare;; keep = (keep - 1) & spare) {  // every subset of spare
        const uint32_t s = d | keep;
        if (std::popcount(s) <= capacity) {
          auto [it, fresh] = next.emplace(s, c);
          if (!fresh) it->second = std::min(it->second, c);
        }
        if (keep == 0) break;
      }
    }
    states.swap(next);
  }
  int64_t best = -1;
  for (const auto& [held, cost] : states) best = best < 0 ? cost : std::min(best, cost);
  return best;
}

// The replay's MIN (furthest next demand first, never an expert of the running demand) is
// the true optimum of that problem: equal to the exhaustive search on random demands of 1
// to `capacity` experts, with a few hot experts as trained routers have.
TEST(AnalysisCachePolicy, BeladyEqualsTheExhaustiveOptimum) {
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(seed);
    const int n_expert = seed % 2 ? 8 : 6, capacity = n_expert / 2;
    std::vector<std::vector<int>> sets;
    std::vector<uint32_t> masks;
    for (int step = 0; step < 16; ++step) {
      std::vector<int> experts(n_expert);
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin() + (rng() % 3 == 0 ? 2 : 0), experts.end(), rng);  // 0 and 1 hot
      experts.resize(1 + rng() % capacity);
      std::sort(experts.begin(), experts.end());
      uint32_t m = 0;
      for (int e : experts) m |= 1u << e;
      sets.push_back(experts);
      masks.push_back(m);
    }
    const Trace t = test::trace_of_sets(n_expert, sets);
    EXPECT_EQ(simulate_cache(t, "belady", CacheScope::PerLayer, capacity).misses,
              exhaustive_min_misses(masks, capacity))
        << "seed " << seed;
  }
}

// MIN is optimal for demand paging: no policy may beat it, at any size, in either scope.
TEST(AnalysisCachePolicy, BeladyNeverWorseOnRandomTraces) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const int n_expert = 4 + int(seed % 3) * 4, n_moe = 1 + int(seed % 3);
    const Trace t = test::random_trace(seed, n_moe, n_expert, 2, 150, seed % 2 ? 1 : 5);
    for (CacheScope scope : {CacheScope::PerLayer, CacheScope::Global}) {
      const int max_cap = scope == CacheScope::PerLayer ? n_expert : n_expert * n_moe;
      for (int cap = 1; cap <= max_cap; ++cap) {
        const int64_t min = simulate_cache(t, "belady", scope, cap).misses;
        for (const auto& p : online_policy_names()) {
          EXPECT_LE(min, simulate_cache(t, p, scope, cap).misses)
              << p << " seed " << seed << " " << scope_name(scope) << " capacity " << cap;
        }
      }
    }
  }
}

TEST(AnalysisCachePolicy, MissCurveEndsAtColdMisses) {
  const Trace t = test::random_trace(5, 2, 8, 2, 100, 3);
  int64_t distinct = 0;
  const auto seq = demand_sequence(t);
  std::vector<bool> seen(16, false);
  for (int u : seq) {
    distinct += !seen[u];
    seen[u] = true;
  }
  const MissCurve m = miss_curve(t, CacheScope::PerLayer);
  ASSERT_EQ(m.per_layer.size(), 8u);
  EXPECT_DOUBLE_EQ(m.fraction.back(), 1.0);
  for (const auto& row : m.results) {
    EXPECT_EQ(row.back().misses, distinct) << row.back().policy;
    EXPECT_EQ(row.back().requests, static_cast<int64_t>(seq.size()));
  }
}

}  // namespace
}  // namespace sy
