// Which expert to evict when a fast tier is full. A unit is one (MoE layer, expert)
// weight block, numbered unit = moe_layer * n_expert + expert. ExpertCache keeps the
// residency of one or more pools of fixed capacity (one per layer, or one for all layers)
// and asks an EvictionPolicy for a victim on a miss into a full pool. The offline
// simulation (src/analysis/cache_sim.h) drives it from traces; the tiered expert store
// drives the same classes from live routing.
//
// Protocol per forward step: begin_step(); then per MoE layer, in execution order,
// note_demand(the layer's experts with tokens) followed by access() of each of them,
// weighted by the tokens the expert received this step. A prefetch is an access of
// weight 0: the unit is loaded, but nothing has used it yet.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sy {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::string name() const = 0;
  virtual void begin_step() {}
  // The current batch routes to `units` (one layer's set, announced before its accesses).
  virtual void note_demand(std::span<const int> units) { (void)units; }
  // `unit` was requested by `tokens` tokens (0: a prefetch): a hit, or a miss after which
  // it was loaded.
  virtual void on_access(int unit, bool hit, double tokens) = 0;
  virtual void on_evict(int unit) { (void)unit; }
  // The unit of `resident` (a full pool; never empty) to evict.
  virtual int victim(std::span<const int> resident) = 0;
};

// Least recently used.
class LruPolicy : public EvictionPolicy {
 public:
  explicit LruPolicy(int n_units) : last_use_(n_units, -1) {}
  std::string name() const override { return "lru"; }
  void on_access(int unit, bool, double) override { last_use_[unit] = tick_++; }
  int victim(std::span<const int> resident) override;

 private:
  std::vector<int64_t> last_use_;
  int64_t tick_ = 0;
};

// Least frequently used, with frequencies decaying by `decay` per step so that old
// popularity fades: score = sum over past steps s of tokens_s(unit) * decay^(now - s).
// Counting tokens, not steps, lets one batched step (a prefill: every expert busy) say
// how popular each expert is instead of making them all equal; single-token steps count
// 1 per use either way. Ties go to the least recently used.
class LfuDecayPolicy : public EvictionPolicy {
 public:
  LfuDecayPolicy(int n_units, double decay);
  std::string name() const override { return "lfu-decay"; }
  void begin_step() override { ++step_; }
  void on_access(int unit, bool hit, double tokens) override;
  void on_evict(int unit) override;
  int victim(std::span<const int> resident) override;
  double score(int unit) const;

 private:
  double decay_;
  int64_t step_ = 0, tick_ = 0;
  std::vector<double> score_;
  std::vector<int64_t> scored_at_, last_use_;
};

// "Towards MoE Deployment" (Huang et al.), Expert Buffering: evict an expert the current
// batch does not use, choosing the most recently loaded one among those (last in, first
// out); only when every resident expert is in use by the batch, the most recently loaded
// of all. The batch's set is what note_demand() announced since begin_step(), which an
// online store knows layer by layer.
class ExpertBufferingPolicy : public EvictionPolicy {
 public:
  explicit ExpertBufferingPolicy(int n_units) : loaded_at_(n_units, -1), demanded_in_(n_units, -1) {}
  std::string name() const override { return "expert-buffering"; }
  void begin_step() override { ++step_; }
  void note_demand(std::span<const int> units) override;
  void on_access(int unit, bool hit, double tokens) override;
  int victim(std::span<const int> resident) override;

 private:
  std::vector<int64_t> loaded_at_, demanded_in_;
  int64_t step_ = 0, tick_ = 0;
};

// Expert Buffering's protection of the current batch with a better choice among the
// rest: evict, among the resident experts the current batch does not use, the one with
// the lowest decayed frequency (as LfuDecayPolicy, ties to the least recently used);
// when the batch uses every resident expert, the most recently loaded (as Expert
// Buffering). Large batches that need more experts than fit then cycle through one slot
// instead of flushing the cache, and single tokens keep the popular experts.
class BatchAwareLfuPolicy : public EvictionPolicy {
 public:
  BatchAwareLfuPolicy(int n_units, double decay)
      : lfu_(n_units, decay), eb_(n_units), demanded_in_(n_units, -1) {}
  std::string name() const override { return "eb-lfu"; }
  void begin_step() override;
  void note_demand(std::span<const int> units) override;
  void on_access(int unit, bool hit, double tokens) override;
  int victim(std::span<const int> resident) override;

 private:
  LfuDecayPolicy lfu_;
  ExpertBufferingPolicy eb_;
  std::vector<int64_t> demanded_in_;
  std::vector<int> candidates_;
  int64_t step_ = 0;
};

// Belady's MIN, the offline optimum for demand paging: evict the unit whose next request
// lies furthest in the future (or never comes). `groups` is the complete sequence of
// demands, one per note_demand() call (a layer's experts in one step), in the order they
// will come; requests within a group may come in any order, since a unit's next use is
// the next group that holds it. A demand or access out of that sequence throws.
class BeladyPolicy : public EvictionPolicy {
 public:
  BeladyPolicy(int n_units, const std::vector<std::vector<int>>& groups);
  std::string name() const override { return "belady"; }
  void note_demand(std::span<const int> units) override;
  void on_access(int unit, bool hit, double tokens) override;
  int victim(std::span<const int> resident) override;

 private:
  std::vector<std::vector<int>> groups_;
  std::vector<std::vector<int64_t>> next_;  // per group and member: the next group that holds it
  std::vector<int64_t> next_use_;           // per unit: its next group (INT64_MAX: none)
  std::vector<int64_t> in_group_;           // per unit: the last group that held it
  int64_t group_ = -1;
};

enum class CacheScope { PerLayer, Global };

// Per-step decay of the LFU frequencies (a half-life of about 140 steps); see
// docs/expert-buffering.md for the sweeps behind it: against 0.98, eb-lfu in per-layer
// pools misses as often or less on every trace measured (the trained model's single-token
// traces 1.26x / 1.27x of MIN against 1.27x / 1.28x, a skewed synthetic trace 20.2%
// against 20.8%).
inline constexpr double kDefaultLfuDecay = 0.995;

// Residency of units in pools of `capacity` experts: one pool per MoE layer, or a single
// pool shared by all layers.
class ExpertCache {
 public:
  // `pinned` (optional): units that may never be evicted (the store's experts in use,
  // loading, or predicted by a prefetch); the policy is never offered one.
  ExpertCache(int n_layers, int n_expert, CacheScope scope, int capacity,
              std::unique_ptr<EvictionPolicy> policy, std::function<bool(int)> pinned = {});

  struct Access {
    bool hit = false;
    int evicted = -1;  // the unit evicted to make room, or -1
  };
  void begin_step() { policy_->begin_step(); }
  void note_demand(std::span<const int> units) { policy_->note_demand(units); }
  // A use of `unit` by `tokens` tokens this step (0: a prefetch, which loads the unit
  // without counting as a use).
  Access access(int unit, double tokens = 1.0);
  // One layer's demand served as the tiered store serves it: note_demand(units), then the
  // resident units first and the missing ones after (`units` is reordered so), each with
  // tokens_of(unit) tokens; meanwhile no unit of the layer is evicted unless every resident
  // one of the pool is (a step needing more experts than fit), since a layer's experts
  // compute together (the store pins them). Returns the misses. The offline replays use
  // this, so that their misses are the store's loads without prefetch.
  template <class TokensOf>
  int64_t serve_layer(std::vector<int>& units, TokensOf&& tokens_of) {
    for (int u : units) check_unit(u);
    note_demand(units);
    std::stable_partition(units.begin(), units.end(), [&](int u) { return resident(u); });
    for (int u : units) running_[u] = 1;
    serving_ = true;
    int64_t misses = 0;
    for (int u : units) misses += access(u, tokens_of(u)).hit ? 0 : 1;
    serving_ = false;
    for (int u : units) running_[u] = 0;
    return misses;
  }
  bool resident(int unit) const { return slot_[unit] >= 0; }
  int capacity() const { return capacity_; }
  int n_units() const { return static_cast<int>(slot_.size()); }
  EvictionPolicy& policy() { return *policy_; }

 private:
  int n_expert_;
  CacheScope scope_;
  int capacity_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::vector<std::vector<int>> pools_;  // resident units per pool
  std::vector<int> slot_;                // unit -> index in its pool, -1 if not resident
  std::function<bool(int)> pinned_;
  std::vector<uint8_t> running_;         // unit -> in the demand serve_layer is serving
  bool serving_ = false;                 // inside serve_layer: running_ marks a demand
  std::vector<int> candidates_;
  void check_unit(int unit) const;       // throws sy::Error for a unit out of range
  // The pool's unit to evict: never a pinned one, and while a demand is served none of it
  // unless every other resident unit is pinned or in it.
  int choose_victim(const std::vector<int>& pool);
};

// The store's default policy. LFU with decay misses as often as eb-lfu or less on every
// trace measured, per layer and global, and keeps the popular experts where eb-lfu's LIFO
// keeps whatever a batch covering the cache loaded first: after a 128-token prompt the
// skewed olmoe decode at 50% read 97.5 against 110.3 MB a token (docs/expert-buffering.md).
inline constexpr const char* kDefaultCachePolicy = "lfu-decay";

// The online policies by name: "lru", "lfu-decay", "expert-buffering", "eb-lfu". Throws sy::Error
// naming the valid choices for anything else (Belady needs the future: build it directly).
std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, int n_units,
                                            double lfu_decay = kDefaultLfuDecay);
std::vector<std::string> online_policy_names();

}  // namespace sy
