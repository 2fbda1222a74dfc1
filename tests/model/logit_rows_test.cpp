// The last layer skips the rows whose logits nobody wants (past their K/V writes): the
// rows that do want logits, and every later step through the cache, must come out as in
// a run that computes every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/forward.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"

namespace sy {
namespace {

using nlohmann::json;

// Pruning changes which rows share a kernel call (a lone row instead of a tile of prompt
// rows), so summation order may differ in the last bits; anything real is far larger.
constexpr double kRelTol = 1e-5;

struct Loaded {
  std::unique_ptr<Model> model;
  std::vector<int32_t> tokens;
};

Loaded load_case(const std::string& dir) {
  const json all = json::parse(test::read_text_file(test::shared_path(dir + "/cases.json")));
  const json& c = all["cases"][0];
  Loaded l;
  l.model = Model::load(test::shared_path(dir + "/" + c.value("model", all["model"].get<std::string>())));
  l.tokens = c["tokens"].get<std::vector<int32_t>>();
  return l;
}

void expect_rows_close(const float* want, const float* got, int64_t n_vocab, const std::string& what) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
    max_diff = std::max(max_diff, std::fabs(double(want[i]) - got[i]));
  }
  EXPECT_LE(max_diff, kRelTol * max_ref) << what;
}

class LogitRows : public ::testing::TestWithParam<std::string> {};

TEST_P(LogitRows, LastRowOnlyMatchesEveryRow) {
  const Loaded l = load_case(GetParam());
  ASSERT_GE(l.tokens.size(), 4u);
  const int64_t n_vocab = l.model->hparams().n_vocab;
  ThreadPool pool(2);
  Session all(*l.model, pool, 256), last(*l.model, pool, 256), chunked(*l.model, pool, 256);
  all.eval(l.tokens, /*all_logits=*/true);
  last.eval(l.tokens);
  chunked.eval(l.tokens, /*all_logits=*/false, /*n_batch=*/3);  // chunks that want no logits at all
  const int64_t n = static_cast<int64_t>(l.tokens.size());
  expect_rows_close(all.logits(n - 1), last.logits(), n_vocab, "last row, one batch");
  expect_rows_close(all.logits(n - 1), chunked.logits(), n_vocab, "last row, chunks of 3");

  // The pruned rows' K/V still reached the cache: the next tokens see the whole prompt.
  for (int step = 0; step < 3; ++step) {
    const int32_t next = static_cast<int32_t>((l.tokens[step] * 7 + 11) % n_vocab);
    all.eval({next});
    last.eval({next});
    chunked.eval({next});
    expect_rows_close(all.logits(), last.logits(), n_vocab, "decode step " + std::to_string(step));
    expect_rows_close(all.logits(), chunked.logits(), n_vocab, "decode step (chunked) " + std::to_string(step));
  }
}

// A ragged batch of two sequences with the wanted rows scattered: each wanted row gets
// the logits it gets when every row is computed, in batch order.
TEST_P(LogitRows, ScatteredRowsOfTwoSequencesMatch) {
  const Loaded l = load_case(GetParam());
  const int64_t n_vocab = l.model->hparams().n_vocab;
  const int64_t n0 = static_cast<int64_t>(l.tokens.size()), n1 = std::min<int64_t>(n0, 5);
  ThreadPool pool(2);
  Forward f_all(*l.model, pool), f_some(*l.model, pool);
  KvCache c_all = f_all.make_cache(128, 2), c_some = f_some.make_cache(128, 2);
  Batch every, some;
  std::vector<int64_t> wanted;
  for (int64_t i = 0; i < n0 + n1; ++i) {
    const bool first = i < n0;
    const int32_t tok = first ? l.tokens[i] : l.tokens[n0 - 1 - (i - n0)];
    const int32_t pos = static_cast<int32_t>(first ? i : i - n0);
    const bool want = (first && (i == 1 || i == n0 - 1)) || i == n0 + n1 - 1;
    every.add(tok, pos, first ? 0 : 1, true);
    some.add(tok, pos, first ? 0 : 1, want);
    if (want) wanted.push_back(i);
  }
  std::vector<float> l_all, l_some;
  f_all.run(every, c_all, l_all);
  f_some.run(some, c_some, l_some);
  ASSERT_EQ(l_some.size(), wanted.size() * n_vocab);
  for (size_t r = 0; r < wanted.size(); ++r) {
    expect_rows_close(&l_all[wanted[r] * n_vocab], &l_some[r * n_vocab], n_vocab, "batch row " + std::to_string(wanted[r]));
  }
}

// What the MoE layers report per step: every layer routes every token, except the last,
// which routes only the rows that want logits (none for a chunk without its last token).
TEST_P(LogitRows, LastLayerReportsOnlyTheRowsItRouted) {
  const Loaded l = load_case(GetParam());
  const HParams& hp = l.model->hparams();
  ThreadPool pool(2);
  Forward f(*l.model, pool);
  KvCache cache = f.make_cache(128);
  const int64_t n = static_cast<int64_t>(l.tokens.size());
  std::vector<float> logits;
  for (int64_t want : {int64_t{1}, int64_t{0}}) {
    cache.release(0);
    Batch b;
    for (int64_t i = 0; i < n; ++i) b.add(l.tokens[i], static_cast<int32_t>(i), 0, want == 1 && i == n - 1);
    f.run(b, cache, logits);
    EXPECT_EQ(logits.size(), static_cast<size_t>(want * hp.n_vocab));
    for (int il = 0; il < hp.n_layer; ++il) {
      if (!hp.layer_is_moe(il)) continue;
      EXPECT_EQ(f.moe_stats()[il].tokens, il == hp.n_layer - 1 ? want : n) << "layer " << il << ", wanted rows " << want;
    }
  }
}

// tiny-mixtral (trained), qwen2moe (shared expert with its gate) and olmoe (qk norms).
INSTANTIATE_TEST_SUITE_P(Models, LogitRows,
                         ::testing::Values("models/tiny-mixtral", "fixtures/qwen2moe", "fixtures/olmoe"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(i.param.find('/') + 1);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace sy
