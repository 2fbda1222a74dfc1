// Applies one SwiGLU FFN (an expert, a shared expert or a dense layer's FFN) to a
// contiguous block of token rows.
#pragma once

#include <vector>

#include "experts/ffn_weights.h"
#include "kernels/cpu/matmul.h"

namespace sy {

class FfnRunner {
 public:
  // out row t = down(silu(gate x_t) * up x_t); out may not alias x.
  void run(const FfnWeights& w, cpu::Rows x, cpu::OutRows out, ThreadPool& pool);

 private:
  std::vector<float> gate_, up_;
  cpu::MatmulScratch scratch_;
};

}  // namespace sy
