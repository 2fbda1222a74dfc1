#include "cli/common.h"

#include <charconv>
#include <cstdio>

#include "base/cpu_info.h"
#include "base/error.h"
#include "base/huge_pages.h"
#include "experts/cache_use.h"

namespace sy::cli {

void ModelArgs::add_to(CLI::App& app, bool with_moe) {
  app.add_option("-m,--model", model, "GGUF model file")->required();
  app.add_option("-t,--threads", threads,
                 "Worker threads (default: the CPUs this process may use, after taskset and a cgroup's quota)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--kv-type", kv_type,
                 "KV cache values: f32 (default; exact), f16 (half the memory and the bytes attention reads) or "
                 "q8_0 (about a quarter: 32-value blocks with one scale)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  if (!with_moe) return;
  CLI::Option* gate =
      app.add_option("--moe-gating", gating, "MoE dispatch: dynamic (default) or static (GShard capacity, drops overflow)")
          ->check(CLI::IsMember({"dynamic", "static"}));
  CLI::Option* factor =
      app.add_option("--capacity-factor", capacity_factor,
                     "Static gating capacity factor (slots per expert = F * tokens * k / experts)")
          ->check(positive_number())
          ->needs(gate);
  // Dynamic gating has no capacity: a factor beside it would be silently ignored.
  app.parse_complete_callback([this, factor] {
    if (factor->count() > 0 && gating != "static") {
      throw CLI::ValidationError("--capacity-factor", "applies to --moe-gating static only (got --moe-gating " +
                                                          gating + "); drop it or use static gating");
    }
  });
  CLI::Option* cache = app.add_option("--expert-cache", expert_cache,
                                       "Keep only this much of the experts in RAM and read the rest from the file "
                                       "with direct I/O: bytes, a size (512MB, 2GB) or a fraction of all expert "
                                       "bytes (0.25, 25%)");
  // The cache's own settings do nothing without it (every expert is resident): refused, so
  // that a forgotten --expert-cache does not pass for a cache run.
  app.add_option("--expert-policy", expert_policy,
                 std::string("Eviction policy of the expert cache (default ") + kDefaultCachePolicy + ")")
      ->check(CLI::IsMember(online_policy_names()))
      ->needs(cache);
  app.add_option("--expert-profile", expert_profile, "Trace (--trace-experts) whose hottest experts stay pinned in the cache")
      ->needs(cache);
  CLI::Option* no_prefetch_flag =
      app.add_flag("--no-prefetch", no_prefetch, "Do not prefetch the next layers' predicted experts")->needs(cache);
  app.add_option("--io-threads", io_threads, "Threads reading experts from the file (expert cache only)")
      ->check(CLI::Range(1, 64))
      ->needs(cache);
  app.add_flag("--no-bounce-reads", no_bounce_reads,
               "Read experts straight into their cache slots instead of through each I/O thread's 2 MiB "
               "buffer (which virtio disks read faster; expert cache only)")
      ->needs(cache);
  app.add_option("--prefetch-layers", prefetch_layers,
                 "MoE layers ahead whose predicted experts start loading early (expert cache only; default: 1 "
                 "to 3, following how many experts each layer has had to read)")
      ->check(CLI::Range(1, 8))
      ->needs(cache)
      ->excludes(no_prefetch_flag);  // a depth for prefetches that are off: one of the two is a mistake
}

ModelOptions ModelArgs::model_options() const {
  ModelOptions o;
  o.expert_cache = expert_cache;
  o.tiered.policy = expert_policy;
  o.tiered.profile = expert_profile;
  o.tiered.predictive_prefetch = !no_prefetch;
  o.tiered.prefetch_layers = prefetch_layers;
  o.tiered.io_threads = io_threads;
  if (no_bounce_reads) o.tiered.bounce_bytes = 0;
  o.kv_type = kv_type == "f16" ? DType::F16 : kv_type == "q8_0" ? DType::Q8_0 : DType::F32;
  return o;
}

MoeOptions ModelArgs::moe() const {
  MoeOptions o;
  o.gating = gating == "static" ? GatingMode::Static : GatingMode::Dynamic;
  o.capacity_factor = capacity_factor;
  return o;
}

namespace {

void warn_without_huge_pages(const TieredExpertStore& store) {
  const std::string w = slot_huge_page_warning(store.slot_huge_page_fraction(), transparent_huge_page_mode());
  if (!w.empty()) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

// Threads beyond the CPUs wait at every step's barrier for one the scheduler left off.
void warn_more_threads_than_cpus(int threads) {
  const int cpus = usable_cpus();
  if (threads <= cpus) return;
  std::fprintf(stderr,
               "warning: -t %d is more threads than the %d CPU(s) this process may use (its affinity and cgroup "
               "quota); each step waits for threads that are not running, which makes it slower: use -t %d or "
               "leave -t out\n",
               threads, cpus, cpus);
}

}  // namespace

std::unique_ptr<Model> load_model(const ModelArgs& a) {
  warn_more_threads_than_cpus(a.threads);
  auto m = Model::load(a.model, a.model_options());
  if (const TieredExpertStore* store = m->tiered_experts()) warn_without_huge_pages(*store);
  return m;
}

ExpertStoreStats expert_cache_counters(const Model& m) {
  const TieredExpertStore* store = m.tiered_experts();
  return store ? store->stats() : ExpertStoreStats{};
}

nlohmann::json report_expert_cache(const char* who, const Model& m, const ExpertStoreStats& before, double tokens) {
  const TieredExpertStore* store = m.tiered_experts();
  if (!store) return nullptr;
  const ExpertCacheUse u = expert_cache_use(before, store->stats());
  std::fprintf(stderr, "%s: expert cache (%s, %d experts): %s\n", who, store->policy_name().c_str(), store->capacity(),
               describe_expert_cache_use(u, tokens).c_str());
  return {{"policy", store->policy_name()},   {"slots", store->capacity()},
          {"hit_rate", u.hit_rate()},         {"prefetched_rate", u.prefetched_rate()},
          {"load_rate", u.load_rate()},       {"loads", u.loads},
          {"bytes_read", u.bytes_read},       {"prefetch_accuracy", u.prefetch_accuracy()},
          {"wait_seconds", u.wait_seconds}};
}

void warn_beyond_training_context(const char* who, const HParams& hp, int64_t ctx) {
  if (hp.n_ctx_train <= 0 || ctx <= hp.n_ctx_train) return;
  std::fprintf(stderr,
               "%s: warning: --ctx-size %lld is longer than the %lld positions the model was trained on; "
               "output past position %lld may be poor\n",
               who, static_cast<long long>(ctx), static_cast<long long>(hp.n_ctx_train),
               static_cast<long long>(hp.n_ctx_train));
}

namespace {

// A number above 0 (strict) or at least 0.
CLI::Validator number_from_zero(bool strict, const char* what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool whole = !text.empty() && ec == std::errc() && end == text.data() + text.size();
        if (!whole) return "'" + text + "' is not a number";
        if (strict ? v > 0 : v >= 0) return {};
        return "must be " + std::string(what) + ", got " + text;
      },
      strict ? "NUMBER > 0" : "NUMBER >= 0");
}

}  // namespace

CLI::Validator positive_number() { return number_from_zero(true, "a positive number"); }
CLI::Validator non_negative_number() { return number_from_zero(false, "0 or more"); }

std::vector<int32_t> parse_token_list(const std::string& csv, int64_t n_vocab) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string::npos) j = csv.size();
    std::string item = csv.substr(i, j - i);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw Error("--tokens: '" + item + "' is not a token id; expected comma-separated integers like 1,2,3");
    }
    if (v < 0 || v >= n_vocab) {
      throw Error("--tokens: id " + item + " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
    }
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return ids;
}

}  // namespace sy::cli
