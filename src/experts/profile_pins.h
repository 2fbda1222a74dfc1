// Which experts an --expert-profile pins, and how many per layer. Pinning the hottest
// experts of a stationary, skewed routing keeps them out of the policy's churn (a
// synthetic Zipf router: 10% fewer bytes read at a 50% cache); with routing that drifts,
// the policy's choice beats any fixed one. So the count is chosen per layer by replaying
// the profile itself: pinned experts plus the policy over the remaining slots.
#pragma once

#include <string>
#include <vector>

#include "experts/trace.h"

namespace sy {

// Per MoE layer of the profile: the experts that received tokens, hottest first (ties:
// lower id).
std::vector<std::vector<int>> experts_by_load(const Trace& profile);

// Misses of one MoE layer's pool of `capacity` slots over the profile's steps from
// `first_step` on, when `pinned` experts stay resident (taking slots) and `policy` manages
// the rest; -1 when the pins leave no slot. Each step's active experts are served as
// analysis/cache_sim serves them (ExpertCache::serve_layer, the store's order).
int64_t replay_layer_misses(const Trace& profile, int moe_layer, const std::vector<int>& pinned, int capacity,
                            const std::string& policy, double lfu_decay, int64_t first_step = 0);

// For each MoE layer, the experts to pin, hottest first: the n hottest for the n in
// 0..capacity - reserve with the fewest replayed misses (ties: fewer pins). `reserve`
// slots stay free for the cold experts of a step and the prefetches. The hottest experts are ranked on
// the whole profile; the replay covers its last kPinReplaySteps steps and at most 33
// evenly spaced counts, so that start-up stays short for long profiles of large models.
inline constexpr int64_t kPinReplaySteps = 2048;
std::vector<std::vector<int>> choose_pinned_experts(const Trace& profile, int capacity, int reserve,
                                                    const std::string& policy, double lfu_decay);

}  // namespace sy
