#include "runtime/kv_cache.h"

#include "base/error.h"

namespace sy {
namespace {

size_t store_bytes(int n_layer, int64_t dim, int64_t n_blocks, int64_t block_size, int n_seq) {
  if (block_size <= 0 || n_blocks <= 0 || n_seq <= 0 || n_layer <= 0 || dim <= 0) {
    throw Error("KV cache: sizes must be positive");
  }
  return static_cast<size_t>(n_blocks) * n_layer * block_size * dim * sizeof(float);
}

}  // namespace

KvCache::KvCache(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_blocks, int64_t block_size, int n_seq)
    : n_layer_(n_layer), k_dim_(k_dim), v_dim_(v_dim), n_blocks_(n_blocks), block_size_(block_size),
      max_positions_(n_blocks * block_size),
      k_bytes_(store_bytes(n_layer, k_dim, n_blocks, block_size, n_seq)),
      v_bytes_(store_bytes(n_layer, v_dim, n_blocks, block_size, n_seq)),
      k_(k_bytes_, /*prefault=*/true),
      v_(v_bytes_, /*prefault=*/true),
      tables_(n_seq) {
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

KvCache KvCache::contiguous(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_ctx, int n_seq) {
  const int64_t bs = 64;
  KvCache c(n_layer, k_dim, v_dim, (n_ctx + bs - 1) / bs * n_seq, bs, n_seq);
  c.max_positions_ = n_ctx;
  return c;
}

bool KvCache::reserve(int seq, int64_t n_positions) {
  if (n_positions > max_positions_) return false;
  auto& t = tables_.at(seq);
  const int64_t need = blocks_needed(n_positions) - static_cast<int64_t>(t.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    t.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvCache::release(int seq) { truncate(seq, 0); }

void KvCache::truncate(int seq, int64_t n_positions) {
  auto& t = tables_.at(seq);
  const auto keep = static_cast<size_t>(blocks_needed(n_positions));
  while (t.size() > keep) {
    free_.push_back(t.back());
    t.pop_back();
  }
}

float* KvCache::row(float* store, int64_t dim, int layer, int seq, int64_t pos) {
  const auto& t = tables_[seq];
  const int32_t block = t.at(static_cast<size_t>(pos / block_size_));
  return store + block_base(block, layer, dim) + static_cast<size_t>(pos % block_size_) * dim;
}

cpu::KvView KvCache::view(int layer, int seq, std::vector<const float*>& blocks) const {
  const auto& t = tables_[seq];
  blocks.resize(2 * t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    blocks[i] = k() + block_base(t[i], layer, k_dim_);
    blocks[t.size() + i] = v() + block_base(t[i], layer, v_dim_);
  }
  return {blocks.data(), blocks.data() + t.size(), block_size_, k_dim_, v_dim_};
}

}  // namespace sy
