// Expert parallelism gives every rank exactly the logits it gets alone: each rank (a thread
// of an InProcessGroup) evaluates its own prompt with the experts split over the ranks, so
// every MoE layer moves expert blocks between ranks (two all-to-alls), and the result must
// equal that rank's prompt evaluated in one process with every expert local. Each row's
// arithmetic is the same whichever rank computes it, so the comparison is exact.
#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"
#include "parallel/in_process_group.h"
#include "runtime/session.h"
#include "support/shared_data.h"

namespace sy {
namespace {

std::vector<float> alone(const Model& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(1);
  Session s(m, pool, 64);
  s.eval(tokens, true);
  const int64_t nv = m.hparams().n_vocab;
  return std::vector<float>(s.logits(0), s.logits(0) + tokens.size() * nv);
}

void check_expert_parallel(const std::string& model, int ranks,
                           const std::vector<std::vector<int32_t>>& prompts) {
  auto m = Model::load(test::shared_path(model));
  InProcessGroup g(ranks);
  std::vector<std::vector<float>> got(ranks);
  std::vector<int64_t> computed(ranks, 0);
  g.run([&](Communicator& comm) {
    const int r = comm.rank();
    ThreadPool pool(1);
    MoeOptions opt;
    opt.comm = &comm;
    Session s(*m, pool, 64, opt);
    s.eval(prompts[r], true);
    const int64_t nv = m->hparams().n_vocab;
    got[r].assign(s.logits(0), s.logits(0) + prompts[r].size() * nv);
    for (const auto& st : s.forward().moe_stats()) computed[r] += st.rows_computed;
  });
  int64_t rows = 0, want_rows = 0;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(got[r], alone(*m, prompts[r])) << model << ": rank " << r << " of " << ranks;
    rows += computed[r];
    want_rows += static_cast<int64_t>(prompts[r].size()) * m->hparams().n_expert_used *
                 (m->hparams().n_layer - m->hparams().n_layer_dense_lead);
  }
  // Every (token, expert) row was computed exactly once, by the expert's owner.
  EXPECT_EQ(rows, want_rows);
}

TEST(ExpertParallel, MixtralTwoRanksMatchOneProcess) {
  check_expert_parallel("fixtures/mixtral/model.gguf", 2,
                        {{1, 15043, 3186, 29892, 920, 526, 366}, {1, 450, 4996, 17354, 1701, 29916}});
}

TEST(ExpertParallel, OlmoeThreeRanksUnevenPromptsMatchOneProcess) {
  // 16 experts over 3 ranks (5 / 5 / 6), prompts of 1, 9 and 4 tokens.
  check_expert_parallel(
      "fixtures/olmoe/model.gguf", 3,
      {{42}, {510, 3158, 8516, 30013, 27287, 689, 253, 22658, 4370}, {12092, 13, 849, 403}});
}

TEST(ExpertParallel, Qwen2MoeMoreRanksThanSomeExpertsGet) {
  // 8 experts over 5 ranks: some ranks own one expert, and most experts see rows from
  // several ranks.
  check_expert_parallel("fixtures/qwen2moe/model.gguf", 5,
                        {{9906, 1917}, {785}, {40, 1079, 1093}, {17, 18, 19, 20}, {2000}});
}

}  // namespace
}  // namespace sy
