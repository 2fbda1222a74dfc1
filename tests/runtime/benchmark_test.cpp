// `switchyard bench`'s figures on the bundled model: every section is there and the
// numbers agree with what the model is (exact weight bytes, top-k experts, gating rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/benchmark.h"

namespace sy {
namespace {

const std::string kDefaultModel = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";

// A short run on 2 threads: these batch sizes, `gen` decode steps after `batch_prompt`
// prompt tokens per sequence, no prefill unless `prompt` is set, a 64 MiB bandwidth probe.
BenchOptions short_run(std::vector<int> batches, int gen, int batch_prompt, int prompt = 0) {
  BenchOptions o;
  o.batches = std::move(batches);
  o.prompt = prompt;
  o.gen = gen;
  o.batch_prompt = batch_prompt;
  o.threads = 2;
  o.bandwidth_bytes = size_t{64} << 20;
  return o;
}

TEST(Benchmark, ReportsEverySectionOnTheDefaultModel) {
  auto model = Model::load(kDefaultModel);
  const HParams& h = model->hparams();
  BenchOptions o = short_run({1, 3}, 4, 8, 16);
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
    EXPECT_FALSE(row.contains("jobs_per_step")) << "only with --job-profile";
  }
  // Batching's gain against one sequence, in the JSON and in the log.
  const double one = j["decode"][0]["tokens_per_s"], three = j["decode"][1]["tokens_per_s"];
  EXPECT_FALSE(j["decode"][0].contains("tokens_per_s_vs_batch_1"));
  EXPECT_DOUBLE_EQ(j["decode"][1].at("tokens_per_s_vs_batch_1").get<double>(), three / one);
  char expected[64];
  std::snprintf(expected, sizeof expected, "decode tokens/s against batch 1: batch 3 %.2fx", three / one);
  EXPECT_NE(std::find(log.begin(), log.end(), std::string(expected)), log.end()) << expected;

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

// `bench --job-profile`: each decode batch's jobs per step, by the code that started them;
// the MoE layers' grouped expert job once per MoE layer and step, and the jobs' time and
// the serial time between them within the step's time.
TEST(Benchmark, ReportsTheJobsOfAStep) {
  auto model = Model::load(kDefaultModel);
  const HParams& h = model->hparams();
  BenchOptions o = short_run({1, 4}, 3, 4);
  o.skip_moe = true;
  o.job_profile = true;
  std::vector<std::string> log;
  const nlohmann::json j = run_benchmark(*model, o, [&](const std::string& s) { log.push_back(s); });
  ASSERT_EQ(j["decode"].size(), 2u);
  for (const auto& row : j["decode"]) {
    SCOPED_TRACE(row.dump());
    const auto& sites = row.at("jobs_per_step");
    ASSERT_FALSE(sites.empty());
    double inside_step = 0;
    bool grouped_ffn = false;
    for (const auto& s : sites) {
      const double wall = s["wall_ms"];
      EXPECT_FALSE(s["site"].get<std::string>().empty());
      EXPECT_GT(s["jobs"].get<double>(), 0.0);
      EXPECT_GE(s["tasks"].get<double>(), s["jobs"].get<double>());
      EXPECT_GE(s["serial_before_ms"].get<double>(), 0.0);
      ASSERT_EQ(s["idle_ms_per_thread"].size(), 2u);
      for (double idle : s["idle_ms_per_thread"]) {
        EXPECT_GE(idle, -0.01);
        EXPECT_LE(idle, wall + 0.01);
      }
      inside_step += wall + s["serial_before_ms"].get<double>();
      if (s["site"] == "GroupedFfn::run") {
        grouped_ffn = true;
        EXPECT_EQ(s["jobs"].get<double>(), h.n_layer - h.n_layer_dense_lead);
      }
    }
    EXPECT_TRUE(grouped_ffn);
    EXPECT_LE(inside_step, 1e3 * row["seconds"].get<double>() / row["steps"].get<int>() + 0.01);
  }
  bool table = false;
  for (const std::string& line : log) table = table || line.find("GroupedFfn::run") != std::string::npos;
  EXPECT_TRUE(table) << "the table goes to the log too";
}

// --moe-gating static reaches the timed runs: every expert's block is computed (padding
// included), where dynamic gating runs only the top-k experts a token picked.
TEST(Benchmark, DecodesWithTheGatingAskedFor) {
  auto model = Model::load(kDefaultModel);
  const HParams& h = model->hparams();
  BenchOptions o = short_run({1}, 3, 4);
  o.skip_moe = true;
  o.moe.gating = GatingMode::Static;
  const nlohmann::json s = run_benchmark(*model, o, [](const std::string&) {});
  EXPECT_EQ(s["moe_gating"]["mode"], "static");
  EXPECT_EQ(s["moe_gating"]["capacity_factor"].get<double>(), 1.0);
  EXPECT_EQ(s["decode"][0]["active_experts_per_moe_layer"].get<double>(), h.n_expert);
  o.moe.gating = GatingMode::Dynamic;
  const nlohmann::json d = run_benchmark(*model, o, [](const std::string&) {});
  EXPECT_EQ(d["moe_gating"]["mode"], "dynamic");
  EXPECT_EQ(d["decode"][0]["active_experts_per_moe_layer"].get<double>(), h.n_expert_used);
}

// With an expert cache of one expert per layer every decode step misses: the cache figures
// account for every expert use and every byte read, and the store's counters agree.
TEST(Benchmark, ReportsTheExpertCacheFigures) {
  ModelOptions mo;
  mo.expert_cache = "0.125";  // 8 experts per layer: one slot each
  auto model = Model::load(kDefaultModel, mo);
  ASSERT_NE(model->tiered_experts(), nullptr);
  const HParams& h = model->hparams();
  BenchOptions o = short_run({1}, 6, 4);
  o.skip_moe = true;
  const nlohmann::json j = run_benchmark(*model, o, [](const std::string&) {});

  EXPECT_EQ(j["expert_cache"]["slots"].get<int>(), h.n_layer);
  EXPECT_GT(j["expert_cache"]["disk_read_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["expert_cache"]["disk_read_gbps_expert_reads"].get<double>(), 0.0);
  // The expert-read probe reads what misses read: every expert's three matrices, inside
  // the file, adding up to the experts' bytes.
  const std::vector<FileRange> reads = model->tiered_experts()->expert_reads();
  ASSERT_EQ(reads.size(), size_t{3} * h.n_layer * h.n_expert);
  size_t read_sum = 0, expert_sum = 0;
  for (const FileRange& fr : reads) {
    EXPECT_LE(fr.offset + fr.len, model->file().file_size());
    read_sum += fr.len;
  }
  for (int il = 0; il < h.n_layer; ++il) {
    for (int e = 0; e < h.n_expert; ++e) expert_sum += model->experts().expert_bytes(il, e);
  }
  EXPECT_EQ(read_sum, expert_sum);
  const auto& c = j["decode"][0].at("expert_cache");
  SCOPED_TRACE(c.dump());
  const double hit = c["hit_rate"], pre = c["prefetched_rate"];
  EXPECT_GE(hit, 0.0);
  EXPECT_GE(pre, 0.0);
  EXPECT_LE(hit + pre, 1.0);
  EXPECT_LT(hit, 0.75);  // top-2 of 8 through one slot: most uses must load
  // Every byte read is a whole expert (same size for all of them here).
  const double expert = static_cast<double>(model->experts().expert_bytes(0, 0));
  const double per_token = c["bytes_read_per_token"];
  EXPECT_GT(per_token, 0.0);
  EXPECT_NEAR(per_token * o.gen / expert, std::round(per_token * o.gen / expert), 1e-6);
  EXPECT_GT(c["disk_bound_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(c["percent_of_disk_bound_expert_reads"].get<double>(), 0.0);
  // The same against the mean of the expert-read probes before and after the decode.
  const double after = j["expert_cache"]["disk_read_gbps_expert_reads_after"];
  EXPECT_GT(after, 0.0);
  const double mean = 0.5 * (after + j["expert_cache"]["disk_read_gbps_expert_reads"].get<double>());
  EXPECT_NEAR(c["percent_of_disk_bound_expert_reads_bracketed"].get<double>(),
              100.0 * j["decode"][0]["tokens_per_s"].get<double>() / (mean * 1e9 / per_token), 1e-6);
  // And against the same reads delivered as the store does (bounce buffers, slot copies).
  const double delivered = j["expert_cache"]["disk_read_gbps_expert_reads_delivered"],
               delivered_after = j["expert_cache"]["disk_read_gbps_expert_reads_delivered_after"];
  EXPECT_GT(delivered, 0.0);
  EXPECT_GT(delivered_after, 0.0);
  EXPECT_NEAR(c["percent_of_disk_bound_expert_reads_delivered_bracketed"].get<double>(),
              100.0 * j["decode"][0]["tokens_per_s"].get<double>() /
                  (0.5 * (delivered + delivered_after) * 1e9 / per_token),
              1e-6);
  const double fraction = c["prefetch_hidden_fraction"];
  EXPECT_GE(fraction, 0.0);
  EXPECT_LE(fraction, 1.0);
  EXPECT_LE(c["prefetch_hidden_ms_per_use"].get<double>(),
            c["prefetch_latency_ms_per_use"].get<double>() + 1e-9);
  EXPECT_LE(c["prefetch_used"].get<int64_t>(), c["prefetch_issued"].get<int64_t>());
  // Where the loads' time went: the disk was busy for part of the decode, with at least
  // one read and at most one per I/O thread (plus the compute thread's) at once.
  const double busy = c["disk_busy_fraction"], in_flight = c["reads_in_flight_while_busy"];
  EXPECT_GT(busy, 0.0);
  EXPECT_LE(busy, 1.0 + 1e-6);  // the counters are read inside the timed window
  EXPECT_GE(in_flight, 1.0 - 1e-9);
  EXPECT_LE(in_flight, model->tiered_experts()->io_threads() + 1.0);
  EXPECT_GT(c["read_ms_mean"].get<double>(), 0.0);
  EXPECT_GE(c["copy_ms_mean"].get<double>(), 0.0);
  EXPECT_LE(c["copy_ms_mean"].get<double>(), c["read_ms_mean"].get<double>());
  EXPECT_GE(c["queue_ms_mean"].get<double>(), 0.0);
  EXPECT_EQ(c["pack_ms_per_token"].get<double>(), 0.0);  // F16 experts are not repacked
}

}  // namespace
}  // namespace sy
