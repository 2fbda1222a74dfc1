// Options and helpers shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "experts/tiered_expert_store.h"
#include "model/model.h"
#include "moe/moe_layer.h"

namespace sy::cli {

struct ModelArgs {
  std::string model;
  int threads = 0;  // 0: the CPUs this process may use (base/cpu_info.h)
  std::string gating = "dynamic";
  double capacity_factor = 1.0;
  std::string expert_cache, expert_policy = kDefaultCachePolicy, expert_profile;
  bool no_prefetch = false;
  bool no_bounce_reads = false;
  int prefetch_layers = 0;  // 0: by cache size (auto_prefetch_layers)
  int io_threads = 8;
  std::string kv_type = "f32";

  void add_to(CLI::App& app, bool with_moe = true);
  MoeOptions moe() const;
  ModelOptions model_options() const;
  int n_threads() const { return threads > 0 ? threads : ThreadPool::default_threads(); }
};

// Loads the model; warns when -t asks for more threads than the process has CPUs, and when
// the expert cache's slots did not get huge pages.
std::unique_ptr<Model> load_model(const ModelArgs& a);

// The expert cache's counters now (zeros without --expert-cache): taken after loading, so
// that a report leaves out the loads of --expert-profile's pins.
ExpertStoreStats expert_cache_counters(const Model& m);
// Tells on stderr (as `who`) how the run since `before` used the expert cache, over `tokens`
// tokens evaluated, and returns the figures as JSON; null and silent without a cache.
nlohmann::json report_expert_cache(const char* who, const Model& m, const ExpertStoreStats& before, double tokens);

// Warns on stderr (as `who`) when a context runs past the positions the model was trained on:
// such positions still run, but the model has never seen them and its output degrades.
void warn_beyond_training_context(const char* who, const HParams& hp, int64_t ctx);

// Checks for numeric flags: a number above 0 (positive) or at least 0. CLI11's own
// PositiveNumber and NonNegativeNumber print the largest double in their messages.
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// Prompt text or comma-separated token ids, turned into the token list to evaluate.
std::vector<int32_t> parse_token_list(const std::string& csv, int64_t n_vocab);

// Subcommand registration; each lives in cmd_<name>.cpp.
void add_generate(CLI::App& app);
void add_logits(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_serve(CLI::App& app);
void add_loadgen(CLI::App& app);
void add_synth(CLI::App& app);
void add_pack(CLI::App& app);
void add_analyze(CLI::App& app);

}  // namespace sy::cli
