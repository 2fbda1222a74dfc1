// Causal multi-head attention with grouped KV heads over one sequence's cached K/V.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"

namespace sy::cpu {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  float scale = 1.0f;
};

// One sequence's cached keys and values in fixed-size blocks: position p's keys
// (n_head_kv * head_dim_k values) start at k_blocks[p / block_size] + (p % block_size) * k_ld.
struct KvView {
  const float* const* k_blocks;
  const float* const* v_blocks;
  int64_t block_size;
  int64_t k_ld;
  int64_t v_ld;

  const float* k(int64_t p) const { return k_blocks[p / block_size] + (p % block_size) * k_ld; }
  const float* v(int64_t p) const { return v_blocks[p / block_size] + (p % block_size) * v_ld; }
};

// For each of n_tokens query rows (q row t at position positions[t]) attends to cached
// positions 0..positions[t] and writes n_head * head_dim_v values to out row t.
// `scores` is scratch; it grows to n_threads * (max position + 1).
void attention(const float* q, int64_t q_ld, int64_t n_tokens, const int32_t* positions,
               const KvView& kv, const AttentionShape& s, float* out, int64_t out_ld,
               ThreadPool& pool, std::vector<float>& scores);

}  // namespace sy::cpu
