// switchyard generate: stream a continuation of a prompt.
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>

#include "base/error.h"
#include "cli/common.h"
#include "experts/trace.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace sy::cli {
namespace {

// Every byte of generated text, NULs included (a byte-level BPE token can be one): fputs
// stopped at the first, and the output lost it and the rest of its piece.
void write_text(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

}  // namespace

void add_generate(CLI::App& app) {
  struct Args {
    ModelArgs m;
    std::string prompt;
    int n_predict = 64;
    int64_t ctx = 0;
    SamplingParams s;
    int64_t seed = static_cast<int64_t>(SamplingParams{}.seed);
    bool ignore_eos = false, no_bos = false;
    std::string trace;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("generate", "Generate text from a prompt (streams tokens as they come)");
  c->footer("Example: switchyard generate -m models/tiny-mixtral-f16.gguf -p \"In the beginning\" -n 32 --temp 0");
  a->m.add_to(*c);
  c->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  c->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  c->add_option("-c,--ctx-size", a->ctx, "Context size (default: the model's training context)")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  c->add_option("--temp", a->s.temperature, "Temperature; 0 (or less) = greedy");
  c->add_option("--top-k", a->s.top_k, "Keep the k most likely tokens (0 = off)");
  c->add_option("--top-p", a->s.top_p, "Nucleus sampling threshold (1 = off)");
  c->add_option("--min-p", a->s.min_p, "Drop tokens below this fraction of the top probability (0 = off)");
  c->add_option("--repeat-penalty", a->s.repeat_penalty, "Penalty for recently seen tokens (1 = off)");
  c->add_option("--repeat-last-n", a->s.repeat_last_n, "How many recent tokens the penalty looks at");
  c->add_option("--seed", a->seed,
                "Seed of the sampler: the same seed gives the same text; -1 draws a random one and prints it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  c->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-generation tokens");
  c->add_flag("--no-bos", a->no_bos, "Do not add BOS to the prompt");
  c->add_option("--trace-experts", a->trace, "Record each step's per-expert token counts to FILE (binary; *.jsonl: JSON lines)");
  c->callback([a] {
    a->s.validate();
    a->s.seed = static_cast<uint64_t>(a->seed);
    if (a->seed == -1) {
      a->s.seed = std::random_device{}();  // printed, so that --seed can repeat the run
      std::fprintf(stderr, "generate: seed %llu (pass --seed %llu to get this text again)\n",
                   static_cast<unsigned long long>(a->s.seed), static_cast<unsigned long long>(a->s.seed));
    }
    auto model = load_model(a->m);
    const Tokenizer& tok = model->tokenizer();
    const auto prompt = tok.encode(a->prompt, tok.add_bos_default() && !a->no_bos, true, tok.add_eos_default());
    if (prompt.empty()) throw Error("generate: the prompt has no tokens");
    const int64_t n_ctx = a->ctx > 0 ? a->ctx : std::min<int64_t>(model->hparams().n_ctx_train, 4096);
    if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
      throw Error("generate: the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                  std::to_string(n_ctx) + "; raise --ctx-size");
    }
    warn_beyond_training_context("generate", model->hparams(), n_ctx);
    ThreadPool pool(a->m.n_threads());
    const ExpertStoreStats cache_before = expert_cache_counters(*model);
    Session session(*model, pool, n_ctx, a->m.moe());
    std::unique_ptr<TraceWriter> trace;
    if (!a->trace.empty()) {
      // The prompt runs in steps of at most 512 tokens (Session::eval's default batch).
      trace = std::make_unique<TraceWriter>(a->trace, TraceInfo::from_hparams(model->hparams(), a->m.gating == "static"),
                                            std::min<int64_t>(n_ctx, 512));
      session.forward().set_routing_observer(trace.get());
    }
    Sampler sampler(a->s);
    for (int32_t t : prompt) sampler.accept(t);

    std::fputs(a->prompt.c_str(), stdout);
    std::fflush(stdout);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    session.eval(prompt);
    const auto t1 = clock::now();
    StreamDecoder out(tok);
    int generated = 0;
    while (generated < a->n_predict && session.n_past() < n_ctx) {
      const int32_t next = sampler.sample(session.logits(), model->hparams().n_vocab);
      if (!a->ignore_eos && tok.is_eog(next)) break;
      sampler.accept(next);
      write_text(out.push(next));
      std::fflush(stdout);
      ++generated;
      if (generated < a->n_predict && session.n_past() < n_ctx) session.eval({next});
    }
    write_text(out.flush());
    std::fputs("\n", stdout);
    if (generated < a->n_predict && session.n_past() >= n_ctx) {
      std::fprintf(stderr, "generate: stopped after %d of %d tokens: the context of %lld positions is full; raise --ctx-size\n",
                   generated, a->n_predict, static_cast<long long>(n_ctx));
    }
    const auto t2 = clock::now();
    const double pt = std::chrono::duration<double>(t1 - t0).count();
    const double gt = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr, "\nprompt: %zu tokens, %.1f tokens/s | generation: %d tokens, %.1f tokens/s | %d threads\n",
                 prompt.size(), prompt.size() / std::max(pt, 1e-9), generated, generated / std::max(gt, 1e-9), pool.size());
    (void)report_expert_cache("generate", *model, cache_before, static_cast<double>(session.n_past()));
    if (trace) {
      trace->close();
      std::fprintf(stderr, "trace: %lld steps written to %s\n", static_cast<long long>(trace->n_steps()), a->trace.c_str());
    }
  });
}

}  // namespace sy::cli
