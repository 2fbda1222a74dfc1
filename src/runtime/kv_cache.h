// Float K/V cache: per layer and sequence slot, n_ctx rows of keys and of values.
// (Issue 4 replaces the contiguous rows with fixed-size blocks and block tables.)
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"

namespace sy {

class KvCache {
 public:
  KvCache(int n_layer, int64_t n_ctx, int64_t k_dim, int64_t v_dim, int n_seq = 1);

  int64_t n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  float* k_row(int layer, int seq, int64_t pos) { return &k_[index(layer, seq, pos, k_dim_)]; }
  float* v_row(int layer, int seq, int64_t pos) { return &v_[index(layer, seq, pos, v_dim_)]; }
  cpu::KvView view(int layer, int seq) const;
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  size_t index(int layer, int seq, int64_t pos, int64_t dim) const {
    return ((static_cast<size_t>(layer) * n_seq_ + seq) * n_ctx_ + pos) * dim;
  }
  int n_layer_, n_seq_;
  int64_t n_ctx_, k_dim_, v_dim_;
  std::vector<float> k_, v_;
};

}  // namespace sy
