// Paged K/V cache of f32, f16 or q8_0 values. Storage is a pool of fixed-size blocks (block_size positions of
// every layer's keys and values); each sequence slot owns a block table mapping its
// positions to blocks. Sequences grow block by block, free their blocks when they end,
// and cannot touch each other's blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "base/huge_pages.h"
#include "kernels/cpu/attention.h"

namespace sy {

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
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t blocks_needed(int64_t n_positions) const { return (n_positions + block_size_ - 1) / block_size_; }
  // Positions seq can hold without allocating.
  int64_t capacity(int seq) const { return static_cast<int64_t>(tables_[seq].size()) * block_size_; }
  // Most positions one sequence may hold (the context size).
  int64_t max_positions() const { return max_positions_; }

  // Makes positions [0, n_positions) of seq addressable; false (nothing changed) when the
  // pool has too few free blocks.
  bool reserve(int seq, int64_t n_positions);
  // Returns every block of seq to the pool.
  void release(int seq);
  // Keeps positions [0, n_positions) and frees the blocks past them.
  void truncate(int seq, int64_t n_positions);

  // Writes position pos of seq at one layer (converted to the cache's type).
  void store(int layer, int seq, int64_t pos, const float* k, const float* v);
  // Copies position pos of one layer from sequence src to dst (a shared prompt prefix).
  void copy_position(int layer, int dst, int src, int64_t pos);
  // Direct access to the values of an F32 cache (tests); throws for other types.
  float* k_row(int layer, int seq, int64_t pos) { return f32(row(k_.data(), k_row_, layer, seq, pos)); }
  float* v_row(int layer, int seq, int64_t pos) { return f32(row(v_.data(), v_row_, layer, seq, pos)); }
  // Attention view of one layer of one sequence; `blocks` is caller scratch.
  cpu::KvView view(int layer, int seq, std::vector<const void*>& blocks) const;
  size_t bytes() const { return k_bytes_ + v_bytes_; }

 private:
  uint8_t* row(uint8_t* store, size_t row_bytes, int layer, int seq, int64_t pos) const;
  float* f32(uint8_t* p) const;
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
  std::vector<int32_t> free_;
};

}  // namespace sy
