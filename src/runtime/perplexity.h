// Perplexity the way llama.cpp's llama-perplexity computes it: the text tokenized once
// (with BOS if the model adds one), cut into non-overlapping windows of n_ctx tokens, each
// window's first token replaced by BOS, and only the second half of each window scored
// (positions n_ctx/2 .. n_ctx-2 predicting the next token).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "moe/moe_layer.h"

namespace sy {

struct PerplexityResult {
  double ppl = 0;
  double nll = 0;  // mean negative log-likelihood
  int64_t n_chunks = 0;
  int64_t n_scored = 0;
  int64_t n_tokens = 0;
};

// observer (may be null) sees every forward step's routing, e.g. a TraceWriter. n_batch
// splits each window into forward steps of at most that many tokens (0: one step per
// window); 1 gives decode-like steps of a single token. The result does not depend on it
// beyond rounding.
PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                            ThreadPool& pool, MoeOptions moe = {}, int64_t max_chunks = 0,
                            const std::function<void(int64_t done, int64_t total, double ppl)>& progress = {},
                            RoutingObserver* observer = nullptr, int64_t n_batch = 0);

}  // namespace sy
