// Log-probabilities of generated tokens, as the OpenAI API returns them: for a logits row,
// log-softmax over the vocabulary and the k most likely tokens. They describe the model's
// own distribution (its raw logits), before penalties, logit_bias, temperature and
// top-k/top-p change what the sampler draws from, as vLLM reports them by default.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace sy {

// At most this many alternatives per token (the OpenAI API's limit for top_logprobs).
inline constexpr int kMaxTopLogprobs = 20;

using TokenLogprob = std::pair<int32_t, float>;  // token id, its log-probability

class LogprobRow {
 public:
  // Keeps a copy of the row (the engine then edits it in place for penalties and bias)
  // with its log-sum-exp and its k most likely tokens (ties: the lower id first).
  void compute(const float* logits, int64_t n_vocab, int k);
  float logprob(int32_t id) const { return static_cast<float>(raw_[static_cast<size_t>(id)] - lse_); }
  std::span<const TokenLogprob> top() const { return top_; }

 private:
  std::vector<float> raw_, scratch_;
  double lse_ = 0.0;
  std::vector<TokenLogprob> top_;
};

}  // namespace sy
