#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/memory_info.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/quantize.h"

namespace sy {
namespace {

size_t store_bytes(int n_layer, size_t row_bytes, int64_t n_blocks, int64_t block_size, int n_seq) {
  if (block_size <= 0 || n_blocks <= 0 || n_seq <= 0 || n_layer <= 0 || row_bytes == 0) {
    throw Error("KV cache: sizes must be positive");
  }
  return static_cast<size_t>(n_blocks) * n_layer * block_size * row_bytes;
}

}  // namespace

size_t KvCache::row_bytes(DType t, int64_t dim) {
  if (dim <= 0) throw Error("KV cache: sizes must be positive");
  if (t == DType::Q8_0 && dim % kQBlock != 0) {
    throw Error("KV cache type q8_0 needs rows of whole 32-value blocks, but a row here has " + std::to_string(dim) +
                " values; use f16 or f32");
  }
  return static_cast<size_t>(cpu::kv_row_bytes(elem(t), dim));
}

cpu::KvElem KvCache::elem(DType t) {
  switch (t) {
    case DType::F32: return cpu::KvElem::F32;
    case DType::F16: return cpu::KvElem::F16;
    case DType::Q8_0: return cpu::KvElem::Q8_0;
    default: throw Error("KV cache type " + dtype_name(t) + " is not supported; use f32, f16 or q8_0");
  }
}

KvCache::KvCache(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_blocks, int64_t block_size, int n_seq,
                 DType type)
    : n_layer_(n_layer), type_(type), k_dim_(k_dim), v_dim_(v_dim), k_row_(row_bytes(type, k_dim)),
      v_row_(row_bytes(type, v_dim)), n_blocks_(n_blocks), block_size_(block_size),
      max_positions_(n_blocks * block_size),
      k_bytes_(store_bytes(n_layer, k_row_, n_blocks, block_size, n_seq)),
      v_bytes_(store_bytes(n_layer, v_row_, n_blocks, block_size, n_seq)) {
  // Checked before anything is allocated: prefaulting more than the machine (or the
  // cgroup) has would end in the OOM killer, not in an error.
  require_available_memory(k_bytes_ + v_bytes_,
                           "the KV cache (" + std::to_string(n_blocks * block_size) + " positions of " +
                               dtype_name(type) + " keys and values)",
                           "lower --ctx-size (or --parallel or --kv-size when serving), or use --kv-type f16 or q8_0");
  k_ = HugePageMemory(k_bytes_, /*prefault=*/true);
  v_ = HugePageMemory(v_bytes_, /*prefault=*/true);
  tables_.resize(static_cast<size_t>(n_seq));
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  retained_.assign(static_cast<size_t>(n_blocks), 0);
  cached_at_.resize(static_cast<size_t>(n_blocks));
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

KvCache KvCache::contiguous(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_ctx, int n_seq, DType type) {
  const int64_t bs = 64;
  KvCache c(n_layer, k_dim, v_dim, (n_ctx + bs - 1) / bs * n_seq, bs, n_seq, type);
  c.max_positions_ = n_ctx;
  return c;
}

bool KvCache::reserve(int seq, int64_t n_positions) {
  if (n_positions > max_positions_) return false;
  auto& t = tables_.at(seq);
  const int64_t need = blocks_needed(n_positions) - static_cast<int64_t>(t.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) t.push_back(take_block());
  return true;
}

int32_t KvCache::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {  // only cached blocks are left: reuse the one released longest ago
    b = cached_.front();
    cached_.pop_front();
    retained_[static_cast<size_t>(b)] = 0;
    if (evicted_) evicted_(b);
  }
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvCache::drop(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (--refs_[i] > 0) return;
  if (retained_[i]) {
    cached_at_[i] = cached_.insert(cached_.end(), b);
  } else {
    free_.push_back(b);
  }
}

int64_t KvCache::attach_cost(const std::vector<int32_t>& prefix, int64_t n_positions, KvRows copy) const {
  int64_t cost = std::max<int64_t>(0, blocks_needed(n_positions) - static_cast<int64_t>(prefix.size()));
  for (int32_t b : prefix) cost += refs_[static_cast<size_t>(b)] == 0;
  if (copy.rows > 0) cost += refs_[static_cast<size_t>(copy.block)] == 0;
  return cost;
}

void KvCache::add_ref(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (refs_[i] == 0) {
    if (!retained_[i]) throw Error("KV cache: a shared prefix block was freed");
    cached_.erase(cached_at_[i]);
  }
  refs_[i]++;
}

bool KvCache::attach(int seq, const std::vector<int32_t>& prefix, int64_t n_positions, KvRows copy) {
  auto& t = tables_.at(seq);
  if (!t.empty()) throw Error("KV cache: a prefix can only be attached to an empty sequence");
  const int64_t first = static_cast<int64_t>(prefix.size()) * block_size_;  // first copied position
  if (copy.rows > 0 && (copy.block < 0 || copy.block >= n_blocks_ || copy.rows > block_size_ ||
                        first + copy.rows > n_positions)) {
    throw Error("KV cache: the rows to copy lie outside the block or past the sequence");
  }
  if (n_positions > max_positions_ || attach_cost(prefix, n_positions, copy) > free_blocks()) return false;
  for (int32_t b : prefix) {
    add_ref(b);
    t.push_back(b);
  }
  if (copy.rows <= 0) return reserve(seq, n_positions);
  add_ref(copy.block);
  const bool ok = reserve(seq, n_positions);
  if (ok) {
    const int32_t dst = t[prefix.size()];
    for (int l = 0; l < n_layer_; ++l) {
      std::memcpy(k_.data() + block_base(dst, l, k_row_), k_.data() + block_base(copy.block, l, k_row_),
                  static_cast<size_t>(copy.rows) * k_row_);
      std::memcpy(v_.data() + block_base(dst, l, v_row_), v_.data() + block_base(copy.block, l, v_row_),
                  static_cast<size_t>(copy.rows) * v_row_);
    }
  }
  drop(copy.block);
  return ok;
}

void KvCache::retain(int32_t b) {
  if (refs_.at(static_cast<size_t>(b)) == 0) throw Error("KV cache: only a block in use can be retained");
  retained_[static_cast<size_t>(b)] = 1;
}

void KvCache::release(int seq) { truncate(seq, 0); }

void KvCache::truncate(int seq, int64_t n_positions) {
  auto& t = tables_.at(seq);
  const auto keep = static_cast<size_t>(blocks_needed(n_positions));
  // Last block first, so that a prefix's deeper blocks are cached before (and so evicted
  // before) the blocks that lead to them.
  while (t.size() > keep) {
    drop(t.back());
    t.pop_back();
  }
}

uint8_t* KvCache::row(uint8_t* store, size_t row_bytes, int layer, int seq, int64_t pos) const {
  const auto& t = tables_[seq];
  const int32_t block = t.at(static_cast<size_t>(pos / block_size_));
  return store + block_base(block, layer, row_bytes) + static_cast<size_t>(pos % block_size_) * row_bytes;
}

float* KvCache::f32(uint8_t* p) const {
  if (type_ != DType::F32) throw Error("KV cache: direct float access needs an f32 cache");
  return reinterpret_cast<float*>(p);
}

void KvCache::store(int layer, int seq, int64_t pos, const float* k, const float* v) {
  uint8_t* kr = row(k_.data(), k_row_, layer, seq, pos);
  uint8_t* vr = row(v_.data(), v_row_, layer, seq, pos);
  switch (type_) {
    case DType::F32:
      std::memcpy(kr, k, k_row_);
      std::memcpy(vr, v, v_row_);
      return;
    case DType::F16: {
      const cpu::DotKernels& kernels = cpu::dot_kernels();
      kernels.to_f16(k, reinterpret_cast<uint16_t*>(kr), k_dim_);
      kernels.to_f16(v, reinterpret_cast<uint16_t*>(vr), v_dim_);
      return;
    }
    default:  // Q8_0, as ggml quantizes: d = max|x| / 127 per block of 32
      cpu::quantize_row_q8_0(k, reinterpret_cast<BlockQ8_0*>(kr), k_dim_);
      cpu::quantize_row_q8_0(v, reinterpret_cast<BlockQ8_0*>(vr), v_dim_);
  }
}

cpu::KvView KvCache::view(int layer, int seq, std::vector<const void*>& blocks) const {
  const auto& t = tables_[seq];
  blocks.resize(2 * t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    blocks[i] = k_.data() + block_base(t[i], layer, k_row_);
    blocks[t.size() + i] = v_.data() + block_base(t[i], layer, v_row_);
  }
  return {blocks.data(), blocks.data() + t.size(), block_size_, k_dim_, v_dim_, elem(type_)};
}

}  // namespace sy
