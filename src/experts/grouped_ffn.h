// Runs several SwiGLU FFNs (one MoE layer's active experts, or a single dense FFN), each
// over its own contiguous block of token rows, as one parallel job whose tasks go in
// three stages:
//   1. prepare each block's input (quantize once, shared by gate and up),
//   2. gate and up rows of every FFN, fused with SwiGLU, tiles sized by token count so a
//      hot expert is split finer and no thread idles behind it; an FFN's last tile
//      prepares its SwiGLU output,
//   3. down rows of every FFN.
// A task waits only for its own FFN's earlier stage, not for the whole stage. Tiles of two
// FFNs of few tokens each run as one task, their rows interleaved.
// Every weight tile is streamed once per step, however many tokens its FFN received.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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
  // Tiles [first, first + count) of one stage's list, as one task.
  struct Task {
    int32_t first, count;
  };
  // Where each FFN is between the stages.
  struct FfnSync {
    std::atomic<int32_t> input_ready{0}, mid_ready{0}, up_tiles_left{0};
  };
  void make_tiles(const std::vector<FfnJob>& jobs, bool down, int threads, std::vector<Tile>& tiles);
  // Neighbouring tiles that interleave (both FFNs of few tokens, the same rows) share a task.
  static void make_tasks(const std::vector<FfnJob>& jobs, bool down, const std::vector<Tile>& tiles,
                         std::vector<Task>& tasks);
  // The three stages' tasks.
  void prepare_input(const std::vector<FfnJob>& jobs, size_t j, cpu::Rows x);
  void gate_up_task(const std::vector<FfnJob>& jobs, const Task& task);
  void down_task(const std::vector<FfnJob>& jobs, const Task& task, cpu::OutRows out);
  // Waits until each of a task's FFNs has its `ready` flag set, and writes its stream
  // (make(job, job index)) to s[k].
  template <class MakeStream>
  void wait_streams(const std::vector<FfnJob>& jobs, const Tile* tiles, int32_t count,
                    std::atomic<int32_t> FfnSync::*ready, MakeStream make, cpu::RowsStream* s);
  // After a tile's gate and up rows: SwiGLU, and the FFN's down input after its last tile.
  void finish_gate_up(const std::vector<FfnJob>& jobs, const Tile& t);

  std::unique_ptr<FfnSync[]> sync_;
  size_t sync_capacity_ = 0;
  int64_t ff_ = 0;  // widest FFN: the row stride of gate_ and up_

  std::vector<cpu::PreparedInput> in_, in_up_, mid_in_;
  std::vector<float> gate_, up_;
  std::vector<Tile> up_tiles_, down_tiles_, by_tokens_;
  std::vector<Task> up_tasks_, down_tasks_;
};

}  // namespace sy
