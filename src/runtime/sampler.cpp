#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace sy {

void SamplingParams::validate() const {
  if (!std::isfinite(temperature)) throw Error("--temp must be a finite number");
  // Written as "not inside the range", so that NaN (which fails every comparison) is refused too.
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw Error("--top-p must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f)) throw Error("--min-p must be in [0, 1], got " + std::to_string(min_p));
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty)) {
    throw Error("--repeat-penalty must be a positive finite number, got " + std::to_string(repeat_penalty));
  }
  if (repeat_last_n < 0) throw Error("--repeat-last-n must be >= 0");
}

int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) { p_.validate(); }

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n == 0) return;
  recent_.push_back(token);
  while (static_cast<int>(recent_.size()) > p_.repeat_last_n) recent_.pop_front();
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab) {
  // Greedy with no penalty reads the row once: no candidate copy.
  if (p_.greedy() && p_.repeat_penalty == 1.0f) return argmax(logits, n_vocab);
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};

  if (p_.repeat_penalty != 1.0f) {
    std::vector<int32_t> seen(recent_.begin(), recent_.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = cand_[id].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }
  if (p_.greedy()) {
    size_t best = 0;
    for (size_t i = 1; i < cand_.size(); ++i) {
      if (cand_[i].logit > cand_[best].logit) best = i;
    }
    return cand_[best].id;
  }

  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    n = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the top-p / min-p cut-offs (as llama.cpp).
  std::vector<float> prob(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    prob[i] = std::exp(cand_[i].logit - cand_[0].logit);
    sum += prob[i];
  }
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    size_t keep = 1;
    while (keep < n && prob[keep] >= p_.min_p * prob[0]) ++keep;
    n = keep;
  }
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = std::exp((cand_[i].logit - cand_[0].logit) / p_.temperature);
  std::discrete_distribution<size_t> dist(w.begin(), w.end());
  return cand_[dist(rng_)].id;
}

}  // namespace sy
