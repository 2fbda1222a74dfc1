#include "runtime/perplexity.h"

#include <cmath>

#include "base/error.h"
#include "runtime/session.h"

namespace sy {

PerplexityResult perplexity(const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                            ThreadPool& pool, MoeOptions moe, int64_t max_chunks,
                            const std::function<void(int64_t, int64_t, double)>& progress,
                            RoutingObserver* observer, int64_t n_batch) {
  if (n_ctx < 4) throw Error("perplexity: -c must be at least 4");
  if (n_batch < 0) throw Error("perplexity: the batch size must not be negative");
  if (n_batch == 0 || n_batch > n_ctx) n_batch = n_ctx;
  PerplexityResult r;
  r.n_tokens = static_cast<int64_t>(tokens.size());
  r.n_chunks = r.n_tokens / n_ctx;
  if (max_chunks > 0) r.n_chunks = std::min(r.n_chunks, max_chunks);
  if (r.n_chunks == 0) {
    throw Error("perplexity: the text has " + std::to_string(r.n_tokens) + " tokens, fewer than one window of " +
                std::to_string(n_ctx) + "; use a longer text or a smaller -c");
  }
  const Tokenizer& tok = model.tokenizer();
  const bool add_bos = tok.add_bos_default() && tok.bos_id() >= 0;
  const int64_t n_vocab = model.hparams().n_vocab;
  const int64_t first = n_ctx / 2;
  Session s(model, pool, n_ctx, moe);
  if (observer) s.forward().set_routing_observer(observer);
  double nll = 0;
  std::vector<int32_t> window(n_ctx);
  for (int64_t c = 0; c < r.n_chunks; ++c) {
    std::copy(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx, window.begin());
    if (add_bos) window[0] = tok.bos_id();
    s.reset();
    s.eval(window, /*all_logits=*/true, n_batch);
    for (int64_t p = first; p < n_ctx - 1; ++p) {
      const float* l = s.logits(p);
      float max = l[0];
      for (int64_t i = 1; i < n_vocab; ++i) max = std::max(max, l[i]);
      double sum = 0;
      for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double(l[i]) - max);
      nll += std::log(sum) - (double(l[tokens[c * n_ctx + p + 1]]) - max);
      ++r.n_scored;
    }
    if (progress) progress(c + 1, r.n_chunks, std::exp(nll / r.n_scored));
  }
  r.nll = nll / r.n_scored;
  r.ppl = std::exp(r.nll);
  return r;
}

}  // namespace sy
