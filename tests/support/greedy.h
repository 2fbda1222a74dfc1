// Greedy decoding through a Session, one token at a time: what the fixtures record as
// greedy_next (llama.cpp's continuation of a prompt).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace sy::test {

// The n tokens that greedy decoding appends to `prompt` (argmax of each step's logits).
inline std::vector<int32_t> greedy_continuation(const Model& model, ThreadPool& pool, int64_t n_ctx,
                                                const std::vector<int32_t>& prompt, size_t n) {
  Session g(model, pool, n_ctx);
  g.eval(prompt);
  std::vector<int32_t> got;
  for (size_t i = 0; i < n; ++i) {
    got.push_back(argmax(g.logits(), model.hparams().n_vocab));
    if (i + 1 < n) g.eval({got.back()});
  }
  return got;
}

}  // namespace sy::test
