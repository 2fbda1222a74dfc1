// Picks the next token from logits: greedy, or repetition penalty -> top-k -> top-p ->
// min-p -> temperature -> a draw from a seeded generator (llama.cpp's default order).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace sy {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax, ties to the lowest id)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0xC0FFEE;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws sy::Error naming the flag when a value is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);

  int32_t sample(const float* logits, int64_t n_vocab);
  // Records a token (prompt or generated) for the repetition penalty.
  void accept(int32_t token);

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  // The repetition penalty on a copy of the logits (work_).
  void apply_repeat_penalty();
  // The cut-offs (top-k, top-p, min-p) over cand_: how many candidates survive, moved to
  // its front.
  size_t cut_candidates();
  // A draw from softmax(w[0..n)) at the sampler's temperature; w is overwritten.
  size_t draw(float* w, size_t n);

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<float> work_;
  std::vector<Candidate> cand_;
  std::vector<float> prob_;  // by token id: exp(logit - top logit), for the cut-offs
};

int32_t argmax(const float* logits, int64_t n);

}  // namespace sy
