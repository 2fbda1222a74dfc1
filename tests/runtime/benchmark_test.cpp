// `switchyard bench`'s figures on the bundled model: every section is there and the
// numbers agree with what the model is (exact weight bytes, top-k experts, gating rows).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/benchmark.h"

namespace sy {
namespace {

TEST(Benchmark, ReportsEverySectionOnTheDefaultModel) {
  auto model = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf");
  const HParams& h = model->hparams();
  BenchOptions o;
  o.batches = {1, 3};
  o.prompt = 16;
  o.gen = 4;
  o.batch_prompt = 8;
  o.threads = 2;
  o.bandwidth_bytes = size_t{64} << 20;
  o.alongside_min_bytes = 0;  // the tiny model's weights sit in the cache: probe them anyway
  std::vector<std::string> log;
  const nlohmann::json j = run_benchmark(*model, o, [&](const std::string& s) { log.push_back(s); });

  EXPECT_GT(j["bandwidth_gbps"]["threads_all"].get<double>(), 0.0);
  EXPECT_EQ(j["prefill"]["tokens"].get<int>(), 16);
  EXPECT_GT(j["prefill"]["tokens_per_s"].get<double>(), 0.0);

  const double dense = j["dense_weight_bytes_per_step"].get<double>();
  EXPECT_EQ(dense, static_cast<double>(model->dense_weight_bytes()));
  ASSERT_EQ(j["decode"].size(), 2u);
  for (const auto& row : j["decode"]) {
    SCOPED_TRACE(row.dump());
    const int batch = row["batch"];
    EXPECT_EQ(row["steps"].get<int>(), 4);
    EXPECT_GT(row["tokens_per_s"].get<double>(), 0.0);
    // Each MoE layer ran at least top-k and at most min(batch x k, n_expert) experts.
    const double active = row["active_experts_per_moe_layer"];
    EXPECT_GE(active, h.n_expert_used);
    EXPECT_LE(active, std::min(batch * h.n_expert_used, h.n_expert));
    if (batch == 1) {
      EXPECT_EQ(active, h.n_expert_used);
    }
    EXPECT_GT(row["bytes_per_step"].get<double>(), dense);
    EXPECT_GT(row.at("bandwidth_alongside_gbps").get<double>(), 0.0);
    EXPECT_GT(row.at("percent_of_bandwidth_alongside").get<double>(), 0.0);
  }

  // Dynamic gating computes every (token, expert) assignment once; static gating pads
  // each expert to its capacity, twice as many rows at factor 2 as at 1.
  const auto& moe = j["moe_layer"];
  EXPECT_EQ(moe["dynamic"]["rows_computed"].get<int64_t>(), int64_t{16} * h.n_expert_used);
  ASSERT_EQ(moe["static"].size(), 2u);
  EXPECT_EQ(moe["static"][1]["rows_computed"].get<int64_t>(), 2 * moe["static"][0]["rows_computed"].get<int64_t>());
  EXPECT_LE(moe["static"][1]["dropped"].get<int64_t>(), moe["static"][0]["dropped"].get<int64_t>());
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0.0);
  EXPECT_FALSE(log.empty());
}

}  // namespace
}  // namespace sy
