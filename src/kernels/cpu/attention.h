// Causal multi-head attention with grouped KV heads over cached K/V, for every sequence
// of a ragged batch in one parallel job.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"

namespace sy::cpu {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  float scale = 1.0f;
};

// How cached values are stored: f32, f16, or q8_0 blocks (BlockQ8_0: 32 int8 values and
// an f16 scale; head sizes are then multiples of 32).
enum class KvElem { F32, F16, Q8_0 };

// Bytes of `values` cached values (whole blocks for q8_0).
inline int64_t kv_row_bytes(KvElem e, int64_t values) {
  if (e == KvElem::Q8_0) return values / kQBlock * static_cast<int64_t>(sizeof(BlockQ8_0));
  return values * (e == KvElem::F16 ? 2 : 4);
}

// One sequence's cached keys and values in fixed-size blocks: position p's keys
// (n_head_kv * head_dim_k values) are row p % block_size of block k_blocks[p / block_size],
// rows of k_ld values each.
struct KvView {
  const void* const* k_blocks;
  const void* const* v_blocks;
  int64_t block_size;
  int64_t k_ld;
  int64_t v_ld;
  KvElem elem = KvElem::F32;

  const void* k(int64_t p) const { return at(k_blocks, k_ld, p); }
  const void* v(int64_t p) const { return at(v_blocks, v_ld, p); }

 private:
  const void* at(const void* const* blocks, int64_t ld, int64_t p) const {
    return static_cast<const uint8_t*>(blocks[p / block_size]) + (p % block_size) * kv_row_bytes(elem, ld);
  }
};

// Batch rows [t0, t0 + n) belong to one sequence whose cache is `kv`.
struct AttentionRun {
  int64_t t0 = 0;
  int64_t n = 0;
  KvView kv{};
};

// Per-thread score buffers, the task list and the partial results of position chunks,
// reused from call to call.
class AttentionScratch {
 public:
  struct Task {
    int32_t run;
    int64_t t0, t1;  // batch rows
    int64_t p0, p1;  // cached positions
    int32_t part;    // -1: all positions, outputs written in place; else its partial slot
  };
  struct Merge {  // the position chunks of rows [t0, t1): partial slots [part0, part0 + n_parts)
    int64_t t0, t1;
    int32_t part0, n_parts;
  };
  std::vector<Task>& tasks() { return tasks_; }
  std::vector<Merge>& merges() { return merges_; }
  void reserve_threads(int n) {
    if (scores_.size() < static_cast<size_t>(n)) scores_.resize(n);
  }
  // Thread `thread`'s buffer of at least n scores.
  float* scores(int thread, size_t n);
  // At least n floats for the partial results of one call.
  float* parts(size_t n);
  // Prompt rows over a q8_0 cache read f32 copies of the positions they see: the runs
  // pointing at the copies, the copies and their block pointers, and per run the positions
  // copied and where its copy starts; the copy jobs are (run, first of 64 positions).
  struct F32Copies {
    std::vector<AttentionRun> runs;
    std::vector<float> values;
    std::vector<const void*> blocks;
    std::vector<int64_t> span, offset;
    std::vector<std::pair<size_t, int64_t>> chunks;
  };
  F32Copies& f32_copies() { return f32_copies_; }
  // Most floats the f32 copies may take at once (128 MiB): past it, attention() takes the
  // runs in groups, making and using each group's copies before the next group's, so
  // that many long prompts in one batch do not hold an f32 copy of all their caches at
  // once. A run whose copy alone is larger still goes, in a group of its own.
  size_t max_copy_floats = size_t{32} << 20;
  std::vector<AttentionRun>& group() { return group_; }

 private:
  std::vector<AttentionRun> group_;
  F32Copies f32_copies_;
  std::vector<Task> tasks_;
  std::vector<Merge> merges_;
  std::vector<std::vector<float>> scores_;
  std::vector<float> parts_;
};

// Query row t (q + t * q_ld, at position positions[t]) attends to its sequence's cached
// positions 0..positions[t] and writes n_head * head_dim_v values to out + t * out_ld.
// Each task takes a few consecutive rows of one sequence (and, at small batch, a chunk of
// its cached positions) and walks the cache once in position order, so every cached row is
// read as one contiguous stream and serves all of the task's queries and heads.
void attention(const float* q, int64_t q_ld, const int32_t* positions, const std::vector<AttentionRun>& runs,
               const AttentionShape& s, float* out, int64_t out_ld, ThreadPool& pool, AttentionScratch& scratch);

}  // namespace sy::cpu
