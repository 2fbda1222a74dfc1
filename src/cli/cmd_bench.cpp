// switchyard bench: bandwidth, prefill, decode per batch size, MoE gating comparison.
#include <cstdio>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "base/json_text.h"
#include "cli/common.h"
#include "cli/version.h"
#include "runtime/benchmark.h"

namespace sy::cli {
namespace {

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const int x = std::stoi(item, &used);
      if (used != item.size() || x <= 0) throw std::invalid_argument(item);
      v.push_back(x);
    } catch (const std::exception&) {
      throw Error(std::string(flag) + ": '" + item + "' is not a positive integer (expected a list like 1,8,16)");
    }
  }
  if (v.empty()) throw Error(std::string(flag) + " needs at least one value");
  return v;
}

}  // namespace

void add_bench(CLI::App& app) {
  struct Args {
    ModelArgs m;
    std::string batches = "1";
    BenchOptions o;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("bench", "Memory bandwidth, prefill and decode speed, dynamic vs static MoE gating");
  c->footer("Example: switchyard bench -m olmoe-q4_0.gguf --batch 1,8,16,32 --prompt 512 --gen 32 --json");
  a->m.add_to(*c);
  c->add_option("--batch", a->batches, "Decode batch sizes, comma-separated (concurrent sequences)");
  c->add_option("--prompt", a->o.prompt, "Prefill length in tokens (0 = skip)")->check(CLI::Range(0, 1 << 16));
  c->add_option("--gen", a->o.gen, "Decode steps per batch size")->check(CLI::Range(1, 1 << 16));
  c->add_option("--batch-prompt", a->o.batch_prompt, "Prompt tokens per sequence before batched decode")->check(CLI::Range(1, 1 << 16));
  c->add_flag("--no-moe", a->o.skip_moe, "Skip the dynamic vs static gating comparison");
  c->add_flag("--job-profile", a->o.job_profile,
              "Time every thread-pool job of the decode steps, per step and grouped by the code that starts it: wall "
              "time, the serial time before it, each thread's idle time inside it");
  c->add_flag("--json", a->json, "Print the figures as JSON on stdout");
  c->callback([a] {
    a->o.batches = parse_int_list(a->batches, "--batch");
    a->o.skip_prefill = a->o.prompt == 0;
    a->o.threads = a->m.threads;
    a->o.moe = a->m.moe();
    auto log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
    const std::string build = version_line();
    log(build);
    {
      // Before loading the model, so the probe buffer does not inflate its peak memory.
      log("measuring memory read bandwidth...");
      ThreadPool one(1), all(a->m.n_threads());
      a->o.bandwidth_1 = measure_read_bandwidth(one, a->o.bandwidth_bytes);
      a->o.bandwidth_all = measure_read_bandwidth(all, a->o.bandwidth_bytes);
    }
    auto model = load_model(a->m);
    auto j = run_benchmark(*model, a->o, log);
    j["build"] = build;
    if (a->json) std::printf("%s\n", json_text(j, 2).c_str());
  });
}

}  // namespace sy::cli
