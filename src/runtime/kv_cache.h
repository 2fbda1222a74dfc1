// Paged K/V cache of f32, f16 or q8_0 values. Storage is a pool of fixed-size blocks (block_size positions of
// every layer's keys and values); each sequence slot holds a block table mapping its
// positions to blocks. Sequences grow block by block and free their blocks when they end.
// A full block of a shared prompt prefix may sit in several tables at once (reference
// counts): such a block is never written again, since a sequence writes only past the
// prefix it attached. A block marked retained outlives its last user as a cached block:
// it counts as free, and is reused (least recently released first) only when no plain free
// block is left, after telling the owner of the retention (the prefix index) that it is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <vector>

#include "base/dtype.h"
#include "base/huge_pages.h"
#include "kernels/cpu/attention.h"

namespace sy {

// The leading `rows` positions of one block: where a new sequence copies the K/V of a
// prefix that ends inside a block (rows 0: nothing to copy).
struct KvRows {
  int32_t block = -1;
  int64_t rows = 0;
};

class KvCache {
 public:
  // n_blocks blocks of block_size positions shared by up to n_seq sequence slots.
  // `type` is F32 (exact), F16 (half the memory and the bytes attention reads) or Q8_0
  // (blocks of 32 values with one f16 scale: 34 bytes per 32 values; needs head sizes that
  // are multiples of 32).
  KvCache(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_blocks, int64_t block_size, int n_seq,
          DType type = DType::F32);
  // A cache for n_seq sequences of up to n_ctx positions each, fully backed.
  static KvCache contiguous(int n_layer, int64_t k_dim, int64_t v_dim, int64_t n_ctx, int n_seq = 1,
                            DType type = DType::F32);

  // Bytes one position of `dim` values takes in a cache of type t; throws sy::Error for
  // types a cache cannot hold (or q8_0 rows that are not whole blocks).
  static size_t row_bytes(DType t, int64_t dim);
  // Bytes one position takes over all layers (keys and values).
  static size_t position_bytes(DType t, int n_layer, int64_t k_dim, int64_t v_dim) {
    return static_cast<size_t>(n_layer) * (row_bytes(t, k_dim) + row_bytes(t, v_dim));
  }
  // The attention kernels' name for a cache type (F32, F16 or Q8_0).
  static cpu::KvElem elem(DType t);

  DType type() const { return type_; }
  int n_seq() const { return static_cast<int>(tables_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  // Blocks a sequence can still get: never used, or cached (retained with no user).
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size() + cached_.size()); }
  int64_t cached_blocks() const { return static_cast<int64_t>(cached_.size()); }
  int64_t blocks_needed(int64_t n_positions) const { return (n_positions + block_size_ - 1) / block_size_; }
  // Positions seq can hold without allocating.
  int64_t capacity(int seq) const { return static_cast<int64_t>(tables_[seq].size()) * block_size_; }
  // Most positions one sequence may hold (the context size).
  int64_t max_positions() const { return max_positions_; }

  // Makes positions [0, n_positions) of seq addressable; false (nothing changed) when the
  // pool has too few free blocks.
  bool reserve(int seq, int64_t n_positions);
  // Free blocks that attach(seq, prefix, n_positions, copy) may hold at once: the new
  // blocks past the prefix, plus the prefix blocks and the copied block that are cached
  // now (they stop counting as free, the copied one until its rows are copied).
  int64_t attach_cost(const std::vector<int32_t>& prefix, int64_t n_positions, KvRows copy = {}) const;
  // Puts the full blocks `prefix` (of another sequence, or cached) at the head of seq's
  // empty table, reserves up to n_positions, and copies the leading rows of block
  // copy.block (at the same depth: the block after the prefix) into seq's next block;
  // false (nothing changed) when the pool is too small. The shared blocks must not be
  // written: they hold positions [0, prefix.size() * block_size), which seq already has.
  // The copied block is held while the pool is drawn on, so it cannot be evicted first.
  bool attach(int seq, const std::vector<int32_t>& prefix, int64_t n_positions, KvRows copy = {});
  // Drops seq's references to its blocks (a block with no user left is freed or cached).
  void release(int seq);
  // Keeps positions [0, n_positions) and drops the blocks past them.
  void truncate(int seq, int64_t n_positions);

  // Block i of seq's table.
  int32_t block(int seq, int64_t i) const { return tables_[seq][static_cast<size_t>(i)]; }
  int users(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  // Keeps `block` (in use, full, never to be written) as a cached block when its last user
  // releases it. When a cached block is taken for reuse, evicted(block) is called first.
  void retain(int32_t block);
  bool retained(int32_t block) const { return retained_[static_cast<size_t>(block)] != 0; }
  void set_eviction_handler(std::function<void(int32_t)> evicted) { evicted_ = std::move(evicted); }

  // Writes position pos of seq at one layer (converted to the cache's type).
  void store(int layer, int seq, int64_t pos, const float* k, const float* v);
  // Direct access to the values of an F32 cache (tests); throws for other types.
  float* k_row(int layer, int seq, int64_t pos) { return f32(row(k_.data(), k_row_, layer, seq, pos)); }
  float* v_row(int layer, int seq, int64_t pos) { return f32(row(v_.data(), v_row_, layer, seq, pos)); }
  // Attention view of one layer of one sequence; `blocks` is caller scratch.
  cpu::KvView view(int layer, int seq, std::vector<const void*>& blocks) const;
  size_t bytes() const { return k_bytes_ + v_bytes_; }

 private:
  uint8_t* row(uint8_t* store, size_t row_bytes, int layer, int seq, int64_t pos) const;
  float* f32(uint8_t* p) const;
  int32_t take_block();
  void add_ref(int32_t block);  // one more user of a block in use or cached
  void drop(int32_t block);
  size_t block_base(int32_t block, int layer, size_t row_bytes) const {  // in bytes
    return (static_cast<size_t>(block) * n_layer_ + layer) * block_size_ * row_bytes;
  }

  int n_layer_;
  DType type_;
  int64_t k_dim_, v_dim_;
  size_t k_row_, v_row_;  // bytes per position of one layer
  int64_t n_blocks_, block_size_, max_positions_;
  size_t k_bytes_, v_bytes_;
  HugePageMemory k_, v_;  // streamed by attention: huge pages keep the prefetcher going
  std::vector<std::vector<int32_t>> tables_;  // per sequence: block ids in position order
  std::vector<int32_t> free_;                 // blocks with no user and nothing worth keeping
  std::vector<int32_t> refs_;                 // per block: tables holding it
  std::vector<uint8_t> retained_;             // per block: cache it when its last user leaves
  std::list<int32_t> cached_;                 // retained blocks with no user, least recently released first
  std::vector<std::list<int32_t>::iterator> cached_at_;  // per block: its place in cached_
  std::function<void(int32_t)> evicted_;
};

}  // namespace sy
