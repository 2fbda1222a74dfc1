// One sequence's incremental decoding state: its KV cache and the number of tokens it
// holds. eval() runs new tokens at the next positions and keeps their logits.
#pragma once

#include <vector>

#include "model/forward.h"

namespace sy {

class Session {
 public:
  Session(const Model& model, ThreadPool& pool, int64_t n_ctx, MoeOptions moe = {});

  // Evaluates tokens at positions n_past().. in chunks of at most `n_batch` tokens.
  // Keeps logits for every token when all_logits, else for the last one only.
  void eval(const std::vector<int32_t>& tokens, bool all_logits = false, int64_t n_batch = 512);

  // Logits of the i-th kept row of the last eval() (0 = the only row without all_logits).
  const float* logits(int64_t row = 0) const { return logits_.data() + row * n_vocab_; }
  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return cache_.max_positions(); }
  const KvCache& cache() const { return cache_; }
  void reset() { n_past_ = 0; }
  Forward& forward() { return forward_; }

 private:
  Forward forward_;
  KvCache cache_;
  int64_t n_past_ = 0;
  int64_t n_vocab_;
  Batch batch_;
  std::vector<float> logits_, chunk_logits_;
};

}  // namespace sy
