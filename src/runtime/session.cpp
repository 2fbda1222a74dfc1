#include "runtime/session.h"

#include <algorithm>

#include "base/error.h"

namespace sy {

Session::Session(const Model& model, ThreadPool& pool, int64_t n_ctx, MoeOptions moe)
    : forward_(model, pool, moe), cache_(forward_.make_cache(n_ctx)), n_vocab_(model.hparams().n_vocab) {}

void Session::eval(const std::vector<int32_t>& tokens, bool all_logits, int64_t n_batch) {
  if (tokens.empty()) throw Error("nothing to evaluate: the input has no tokens");
  if (n_past_ + static_cast<int64_t>(tokens.size()) > cache_.max_positions()) {
    throw Error("the sequence needs " + std::to_string(n_past_ + tokens.size()) +
                " positions but the context holds " + std::to_string(cache_.max_positions()) +
                "; raise --ctx-size or shorten the input");
  }
  logits_.clear();
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t i0 = 0; i0 < n; i0 += n_batch) {
    const int64_t i1 = std::min(n, i0 + n_batch);
    batch_.clear();
    for (int64_t i = i0; i < i1; ++i) batch_.add(tokens[i], static_cast<int32_t>(n_past_ + i), 0, all_logits || i == n - 1);
    forward_.run(batch_, cache_, chunk_logits_);
    logits_.insert(logits_.end(), chunk_logits_.begin(), chunk_logits_.end());
  }
  n_past_ += n;
}

}  // namespace sy
