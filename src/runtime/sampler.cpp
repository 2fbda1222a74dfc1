#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/cpu/ops.h"

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
  // Greedy with no penalty reads the row once: no copy.
  if (p_.greedy() && p_.repeat_penalty == 1.0f) return argmax(logits, n_vocab);
  work_.assign(logits, logits + n_vocab);
  apply_repeat_penalty();
  if (p_.greedy()) return argmax(work_.data(), n_vocab);
  // Without a cut-off every token is a candidate, drawn in id order: the draw's
  // distribution does not depend on the order, and sorting a 50k vocabulary took 3.2 ms a
  // token (OpenAI's defaults, temperature 1 and no nucleus: 37 against 43 tokens/s at one
  // stream on olmoe).
  const bool top_k = p_.top_k > 0 && p_.top_k < n_vocab;
  if (!top_k && p_.top_p >= 1.0f && p_.min_p <= 0.0f) return static_cast<int32_t>(draw(work_.data(), work_.size()));
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), work_[i]};
  const size_t n = cut_candidates();
  for (size_t i = 0; i < n; ++i) work_[i] = cand_[i].logit;
  return cand_[draw(work_.data(), n)].id;
}

void Sampler::apply_repeat_penalty() {
  if (p_.repeat_penalty == 1.0f) return;
  std::vector<int32_t> seen(recent_.begin(), recent_.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t id : seen) {
    if (id < 0 || static_cast<size_t>(id) >= work_.size()) continue;
    float& l = work_[id];
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
  }
}

size_t Sampler::cut_candidates() {
  // Most likely first, equal logits by id: one order whatever the input's.
  auto more_likely = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  const auto begin = cand_.begin();
  size_t n = cand_.size();
  size_t sorted = 0;  // cand_[0, sorted) in order, each more likely than any candidate after it
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(begin, begin + p_.top_k, cand_.end(), more_likely);
    n = sorted = static_cast<size_t>(p_.top_k);
  }
  if (p_.top_p >= 1.0f && p_.min_p <= 0.0f) return n;

  // Probabilities at temperature 1, relative to the most likely token, for the top-p and
  // min-p cut-offs (as llama.cpp).
  // Each candidate's exp once, kept by id: the partition and the sorts below move the
  // candidates, not their ids.
  const float top = sorted > 0 ? cand_[0].logit : std::min_element(begin, begin + n, more_likely)->logit;
  prob_.resize(work_.size());
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += prob_[cand_[i].id] = std::exp(cand_[i].logit - top);
  auto prob = [&](size_t i) { return prob_[cand_[i].id]; };
  // Both cut-offs keep a prefix of the sorted candidates, so the shorter prefix wins. min-p
  // keeps those at least min_p as likely as the top one (the top one always): moved to the
  // front in any order, or counted where they are already sorted.
  if (p_.min_p > 0.0f) {
    auto kept = [&](const Candidate& c) { return prob_[c.id] >= p_.min_p; };
    if (sorted > 0) {
      size_t keep = 1;
      while (keep < n && kept(cand_[keep])) ++keep;
      n = sorted = keep;
    } else {
      n = static_cast<size_t>(std::partition(begin, begin + n, kept) - begin);
    }
  }
  if (p_.top_p >= 1.0f) return n;
  // top-p: the most likely tokens until their probability reaches top_p, sorted only as
  // far as the walk goes (a chunk at a time, each four times the last).
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (i == sorted) {
      const size_t upto = std::min(n, std::max<size_t>(64, 4 * sorted));
      if (upto < n) std::nth_element(begin + sorted, begin + upto, begin + n, more_likely);
      std::sort(begin + sorted, begin + upto, more_likely);
      sorted = upto;
    }
    cum += prob(i) / sum;
    if (cum >= p_.top_p) return i + 1;
  }
  return n;
}

size_t Sampler::draw(float* w, size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] /= p_.temperature;
  float max = 0.0f;
  // libm's exp (ops.h), not the vector kernels' polynomial: a seed draws the same token
  // on every CPU.
  const double sum = cpu::exp_minus_max(w, static_cast<int64_t>(n), &max);
  const double target = std::uniform_real_distribution<double>(0.0, sum)(rng_);
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += w[i];
    if (target < cum) return i;
  }
  // The partial sums repeat exp_minus_max's, so only a draw of exactly `sum` gets here.
  size_t last = n - 1;
  while (last > 0 && w[last] == 0.0f) --last;
  return last;
}

}  // namespace sy
