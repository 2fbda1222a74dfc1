#include "runtime/token_logprobs.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"

namespace sy {

void LogprobRow::compute(const float* logits, int64_t n_vocab, int k) {
  raw_.assign(logits, logits + n_vocab);
  scratch_.assign(logits, logits + n_vocab);
  float max = 0.0f;
  const double sum = cpu::exp_minus_max(scratch_.data(), n_vocab, &max);
  lse_ = static_cast<double>(max) + std::log(sum);

  // The k largest in one pass: a small sorted list, most likely first.
  k = static_cast<int>(std::clamp<int64_t>(k, 0, n_vocab));
  top_.clear();
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  for (int32_t id = 0; k > 0 && id < n_vocab; ++id) {
    const TokenLogprob c{id, raw_[static_cast<size_t>(id)]};
    if (static_cast<int>(top_.size()) == k && !better(c, top_.back())) continue;
    if (static_cast<int>(top_.size()) == k) top_.pop_back();
    top_.insert(std::upper_bound(top_.begin(), top_.end(), c, better), c);
  }
  for (TokenLogprob& t : top_) t.second = static_cast<float>(t.second - lse_);
}

}  // namespace sy
