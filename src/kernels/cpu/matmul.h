// y = x * W^T for a block of token rows: y[t][r] = dot(W row r, x row t).
// Quantized weights get their activations quantized to Q8_0 once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "base/weight_matrix.h"
#include "kernels/cpu/packed.h"

namespace sy::cpu {

// Reusable buffers for activation conversions; grows, never shrinks, so steady-state
// calls do not allocate.
class MatmulScratch {
 public:
  BlockQ8_0* q8(size_t n_blocks) {
    if (q8_.size() < n_blocks) q8_.resize(n_blocks);
    return q8_.data();
  }
  PackedActivations& packed() { return packed_; }

 private:
  std::vector<BlockQ8_0> q8_;
  PackedActivations packed_;
};

struct Rows {
  const float* data;
  int64_t n;   // number of rows (tokens)
  int64_t ld;  // floats between consecutive rows
};

struct OutRows {
  float* data;
  int64_t ld;
};

void matmul(const WeightMatrix& w, Rows x, OutRows y, ThreadPool& pool, MatmulScratch& scratch);

// The same on the calling thread only (used inside jobs that are already parallel).
void matmul_serial(const WeightMatrix& w, Rows x, OutRows y, MatmulScratch& scratch);

}  // namespace sy::cpu
