// Runs several SwiGLU FFNs (one MoE layer's active experts, or a single dense FFN), each
// over its own contiguous block of token rows, as a few parallel jobs over
// (FFN, row-tile) tasks:
//   1. prepare each block's input (quantize once, shared by gate and up),
//   2. gate and up rows of every FFN, fused with SwiGLU, tiles sized by token count so a
//      hot expert is split finer and no thread idles behind it,
//   3. prepare each block's SwiGLU output,
//   4. down rows of every FFN.
// Every weight tile is streamed once per step, however many tokens its FFN received.
#pragma once

#include <cstdint>
#include <vector>

#include "experts/ffn_weights.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"

namespace sy {

class GroupedFfn {
 public:
  // x and out hold all jobs' rows (ld floats apart); out may not alias x.
  void run(const std::vector<FfnJob>& jobs, cpu::Rows x, cpu::OutRows out, ThreadPool& pool);

 private:
  struct Tile {
    int32_t job;
    int64_t r0, r1;
  };
  void make_tiles(const std::vector<FfnJob>& jobs, bool down, int threads);

  std::vector<cpu::PreparedInput> in_, in_up_, mid_in_;
  std::vector<float> gate_, up_;
  std::vector<Tile> tiles_, by_tokens_;
};

}  // namespace sy
