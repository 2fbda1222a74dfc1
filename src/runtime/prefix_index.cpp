#include "runtime/prefix_index.h"

#include <algorithm>

#include "base/mix64.h"

namespace sy {

PrefixIndex::PrefixIndex(KvCache& cache)
    : cache_(cache), block_size_(cache.block_size()), entries_(static_cast<size_t>(cache.n_blocks())) {
  cache_.set_eviction_handler([this](int32_t b) { evict(b); });
}

uint64_t PrefixIndex::key(uint64_t parent, const int32_t* tokens) const {
  // splitmix64 steps over the parent's serial and the tokens: cheap, and well mixed
  // enough that distinct keys almost never meet (holds() rules out a false match).
  auto mix = [](uint64_t x) { return mix64(x + 0x9e3779b97f4a7c15ULL); };
  uint64_t h = mix(parent);
  for (int64_t i = 0; i < block_size_; ++i) h = mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

bool PrefixIndex::holds(const Entry& e, uint64_t parent, const int32_t* tokens) const {
  return e.serial != 0 && e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), tokens);
}

void PrefixIndex::match(const int32_t* tokens, int64_t n_tokens, Match& m) const {
  m.blocks.clear();
  m.last = 0;
  for (int64_t pos = 0; pos + block_size_ <= n_tokens; pos += block_size_) {
    const auto it = by_key_.find(key(m.last, tokens + pos));
    if (it == by_key_.end()) return;
    const Entry& e = entries_[static_cast<size_t>(it->second)];
    if (!holds(e, m.last, tokens + pos)) return;
    m.blocks.push_back(it->second);
    m.last = e.serial;
  }
}

uint64_t PrefixIndex::add(int32_t block, uint64_t parent, const int32_t* tokens) {
  Entry& e = entries_.at(static_cast<size_t>(block));
  if (e.serial != 0) return holds(e, parent, tokens) ? e.serial : 0;
  const uint64_t k = key(parent, tokens);
  const auto it = by_key_.find(k);
  if (it != by_key_.end()) {
    const Entry& other = entries_[static_cast<size_t>(it->second)];
    return holds(other, parent, tokens) ? other.serial : 0;
  }
  register_entry(block, parent, k, tokens, block_size_);
  by_key_.emplace(k, block);
  return e.serial;
}

void PrefixIndex::add_tail(int32_t block, uint64_t parent, const int32_t* tokens, int64_t rows) {
  if (rows <= 0 || rows >= block_size_ || entries_.at(static_cast<size_t>(block)).serial != 0) return;
  if (longest_next(parent, tokens, rows).rows == rows) return;
  register_entry(block, parent, 0, tokens, rows);
}

void PrefixIndex::register_entry(int32_t block, uint64_t parent, uint64_t key, const int32_t* tokens, int64_t n) {
  Entry& e = entries_[static_cast<size_t>(block)];
  e.serial = next_serial_++;
  e.parent = parent;
  e.key = key;
  e.tokens.assign(tokens, tokens + n);
  by_parent_[parent].push_back(block);
  cache_.retain(block);
}

KvRows PrefixIndex::longest_next(uint64_t parent, const int32_t* tokens, int64_t n_tokens) const {
  KvRows best;
  const auto it = by_parent_.find(parent);
  if (it == by_parent_.end()) return best;
  for (int32_t b : it->second) {
    const auto& t = entries_[static_cast<size_t>(b)].tokens;
    const int64_t n = std::min(n_tokens, static_cast<int64_t>(t.size()));
    int64_t i = 0;
    while (i < n && t[static_cast<size_t>(i)] == tokens[i]) ++i;
    if (i > best.rows) best = {b, i};
  }
  return best;
}

void PrefixIndex::evict(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.serial == 0) return;
  if (static_cast<int64_t>(e.tokens.size()) == block_size_) by_key_.erase(e.key);
  auto& siblings = by_parent_[e.parent];
  siblings.erase(std::find(siblings.begin(), siblings.end(), block));
  if (siblings.empty()) by_parent_.erase(e.parent);
  e.serial = 0;
}

}  // namespace sy
