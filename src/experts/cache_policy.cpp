#include "experts/cache_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace sy {

int LruPolicy::victim(std::span<const int> resident) {
  int best = resident[0];
  for (int u : resident) {
    if (last_use_[u] < last_use_[best]) best = u;
  }
  return best;
}

LfuDecayPolicy::LfuDecayPolicy(int n_units, double decay)
    : decay_(decay), score_(n_units, 0.0), scored_at_(n_units, 0), last_use_(n_units, -1) {
  if (!(decay > 0.0 && decay <= 1.0)) throw Error("lfu-decay: the decay factor must be in (0, 1]");
}

double LfuDecayPolicy::score(int unit) const {
  return score_[unit] * std::pow(decay_, static_cast<double>(step_ - scored_at_[unit]));
}

// A unit is requested at most once per step and layer, with its token count.
void LfuDecayPolicy::on_access(int unit, bool, double tokens) {
  score_[unit] = score(unit) + tokens;
  scored_at_[unit] = step_;
  last_use_[unit] = tick_++;
}

// Frequencies survive eviction (the policy remembers popularity of experts not held),
// which is what makes LFU resist one-off scans.
void LfuDecayPolicy::on_evict(int) {}

int LfuDecayPolicy::victim(std::span<const int> resident) {
  int best = resident[0];
  double best_score = score(best);
  for (int u : resident) {
    const double s = score(u);
    if (s < best_score || (s == best_score && last_use_[u] < last_use_[best])) {
      best = u;
      best_score = s;
    }
  }
  return best;
}

void ExpertBufferingPolicy::note_demand(std::span<const int> units) {
  for (int u : units) demanded_in_[u] = step_;
}

void ExpertBufferingPolicy::on_access(int unit, bool hit, double) {
  if (!hit) loaded_at_[unit] = tick_;
  ++tick_;
}

int ExpertBufferingPolicy::victim(std::span<const int> resident) {
  int best = -1, any = resident[0];
  for (int u : resident) {
    if (loaded_at_[u] > loaded_at_[any]) any = u;
    if (demanded_in_[u] != step_ && (best < 0 || loaded_at_[u] > loaded_at_[best])) best = u;
  }
  return best >= 0 ? best : any;
}

void BatchAwareLfuPolicy::begin_step() {
  ++step_;
  lfu_.begin_step();
  eb_.begin_step();
}

void BatchAwareLfuPolicy::note_demand(std::span<const int> units) {
  for (int u : units) demanded_in_[u] = step_;
  eb_.note_demand(units);
}

void BatchAwareLfuPolicy::on_access(int unit, bool hit, double tokens) {
  lfu_.on_access(unit, hit, tokens);
  eb_.on_access(unit, hit, tokens);
}

int BatchAwareLfuPolicy::victim(std::span<const int> resident) {
  candidates_.clear();
  for (int u : resident) {
    if (demanded_in_[u] != step_) candidates_.push_back(u);
  }
  return candidates_.empty() ? eb_.victim(resident) : lfu_.victim(candidates_);
}

BeladyPolicy::BeladyPolicy(int n_units, const std::vector<std::vector<int>>& groups)
    : groups_(groups), next_(groups.size()), next_use_(n_units, std::numeric_limits<int64_t>::max()),
      in_group_(n_units, -1) {
  std::vector<int64_t> upcoming(n_units, std::numeric_limits<int64_t>::max());
  for (int64_t g = static_cast<int64_t>(groups_.size()) - 1; g >= 0; --g) {
    for (int u : groups_[g]) {
      if (u < 0 || u >= n_units)
        throw Error("belady: demand " + std::to_string(g) + " names unit " + std::to_string(u) + ", outside 0.." +
                    std::to_string(n_units - 1));
      next_[g].push_back(upcoming[u]);
    }
    for (int u : groups_[g]) upcoming[u] = g;
  }
}

void BeladyPolicy::note_demand(std::span<const int> units) {
  ++group_;
  if (group_ >= static_cast<int64_t>(groups_.size()) ||
      !std::equal(units.begin(), units.end(), groups_[group_].begin(), groups_[group_].end())) {
    throw Error("belady: demand " + std::to_string(group_) +
                " does not follow the sequence of demands the policy was built from");
  }
  for (size_t j = 0; j < units.size(); ++j) {
    next_use_[units[j]] = next_[group_][j];
    in_group_[units[j]] = group_;
  }
}

void BeladyPolicy::on_access(int unit, bool, double) {
  if (group_ < 0 || in_group_[unit] != group_) {
    throw Error("belady: an access to unit " + std::to_string(unit) + " outside demand " + std::to_string(group_));
  }
}

int BeladyPolicy::victim(std::span<const int> resident) {
  int best = resident[0];
  for (int u : resident) {
    if (next_use_[u] > next_use_[best]) best = u;
  }
  return best;
}

ExpertCache::ExpertCache(int n_layers, int n_expert, CacheScope scope, int capacity,
                         std::unique_ptr<EvictionPolicy> policy, std::function<bool(int)> pinned)
    : n_expert_(n_expert),
      scope_(scope),
      capacity_(capacity),
      policy_(std::move(policy)),
      pools_(scope == CacheScope::PerLayer ? n_layers : 1),
      slot_(size_t(n_layers) * n_expert, -1),
      pinned_(std::move(pinned)),
      running_(size_t(n_layers) * n_expert, 0) {
  if (n_layers < 1 || n_expert < 1) throw Error("expert cache: needs at least one layer and one expert");
  if (capacity < 1) throw Error("expert cache: the capacity must be at least one expert");
  if (!policy_) throw Error("expert cache: no eviction policy");
}

void ExpertCache::check_unit(int unit) const {
  if (unit < 0 || unit >= n_units()) throw Error("expert cache: unit " + std::to_string(unit) + " is out of range");
}

int ExpertCache::choose_victim(const std::vector<int>& pool) {
  if (!pinned_ && !serving_) return policy_->victim(pool);
  for (bool spare_running : {true, false}) {
    if (!spare_running && !serving_) break;
    candidates_.clear();
    for (int u : pool) {
      if (!(pinned_ && pinned_(u)) && !(spare_running && running_[u])) candidates_.push_back(u);
    }
    if (!candidates_.empty()) return policy_->victim(candidates_);
  }
  throw Error("expert cache: every resident expert is in use (internal error)");
}

ExpertCache::Access ExpertCache::access(int unit, double tokens) {
  check_unit(unit);
  Access a;
  if (slot_[unit] >= 0) {
    a.hit = true;
    policy_->on_access(unit, true, tokens);
    return a;
  }
  std::vector<int>& pool = pools_[scope_ == CacheScope::PerLayer ? unit / n_expert_ : 0];
  if (static_cast<int>(pool.size()) >= capacity_) {
    const int v = choose_victim(pool);
    const int at = slot_[v];
    if (at < 0 || pool[at] != v)
      throw Error("expert cache: policy " + policy_->name() + " chose a victim outside the pool");
    pool[at] = pool.back();
    slot_[pool[at]] = at;
    pool.pop_back();
    slot_[v] = -1;
    policy_->on_evict(v);
    a.evicted = v;
  }
  slot_[unit] = static_cast<int>(pool.size());
  pool.push_back(unit);
  policy_->on_access(unit, false, tokens);
  return a;
}

std::vector<std::string> online_policy_names() {
  return {"lru", "lfu-decay", "expert-buffering", "eb-lfu"};
}

std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, int n_units, double lfu_decay) {
  if (name == "lru") return std::make_unique<LruPolicy>(n_units);
  if (name == "lfu-decay") return std::make_unique<LfuDecayPolicy>(n_units, lfu_decay);
  if (name == "expert-buffering") return std::make_unique<ExpertBufferingPolicy>(n_units);
  if (name == "eb-lfu") return std::make_unique<BatchAwareLfuPolicy>(n_units, lfu_decay);
  throw Error("unknown cache policy '" + name + "' (choose lru, lfu-decay, expert-buffering or eb-lfu)");
}

}  // namespace sy
