// switchyard perplexity: llama.cpp-compatible perplexity of a text file.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_text.h"
#include "base/whole_file.h"
#include "cli/common.h"
#include "experts/trace.h"
#include "runtime/perplexity.h"

namespace sy::cli {

void add_perplexity(CLI::App& app) {
  struct Args {
    ModelArgs m;
    std::string file;
    int64_t ctx = 512;
    int64_t chunks = 0;
    int64_t batch = 0;
    std::string trace;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("perplexity", "Perplexity of a text file (llama.cpp's method)");
  c->footer(
      "Example: switchyard perplexity -m model.gguf -f valid.txt -c 256 --json\n"
      "         switchyard perplexity -m model.gguf -f valid.txt -c 256 --chunks 20 --trace-experts ppl.sytrace");
  a->m.add_to(*c);
  c->add_option("-f,--file", a->file, "UTF-8 text file")->required();
  c->add_option("-c,--ctx-size", a->ctx, "Window size in tokens")->check(CLI::Range(int64_t{4}, int64_t{1} << 20));
  c->add_option("--chunks", a->chunks, "Score at most this many windows (0 = all)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  c->add_option("-b,--batch-size", a->batch, "Tokens per forward step within a window (default: the whole window; 1 = decode-like steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--trace-experts", a->trace, "Record each step's per-expert token counts to FILE (binary; *.jsonl: JSON lines)");
  c->add_flag("--json", a->json, "Print the result as a JSON object");
  c->callback([a] {
    std::string text = read_whole_file(a->file, "perplexity");
    if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp's file loader
    auto model = load_model(a->m);
    const Tokenizer& tok = model->tokenizer();
    const auto tokens = tok.encode(text, tok.add_bos_default(), false, tok.add_eos_default());
    ThreadPool pool(a->m.n_threads());
    const ExpertStoreStats cache_before = expert_cache_counters(*model);
    std::unique_ptr<TraceWriter> trace;
    if (!a->trace.empty()) {
      const int64_t step_tokens = a->batch > 0 ? std::min(a->batch, a->ctx) : a->ctx;
      trace = std::make_unique<TraceWriter>(a->trace, TraceInfo::from_hparams(model->hparams(), a->m.gating == "static"),
                                            step_tokens);
    }
    // The running perplexity: one line redrawn on a terminal, a line every 10% of the
    // windows otherwise (a log file gets no carriage returns).
    const bool stderr_tty = isatty(STDERR_FILENO) != 0;
    int64_t last_tenth = -1;
    auto r = perplexity(*model, tokens, a->ctx, pool, a->m.moe(), a->chunks, [&](int64_t done, int64_t total, double ppl) {
      const int64_t tenth = done * 10 / total;
      if (!stderr_tty && tenth == last_tenth && done < total) return;
      last_tenth = tenth;
      std::fprintf(stderr, "%s[%lld/%lld] ppl %.4f%s", stderr_tty ? "\r" : "", static_cast<long long>(done),
                   static_cast<long long>(total), ppl, !stderr_tty || done == total ? "\n" : "");
    }, trace.get(), a->batch);
    if (trace) {
      trace->close();
      std::fprintf(stderr, "trace: %lld steps written to %s\n", static_cast<long long>(trace->n_steps()), a->trace.c_str());
    }
    // Every window's tokens go through the model once.
    const nlohmann::json cache_use =
        report_expert_cache("perplexity", *model, cache_before, static_cast<double>(r.n_chunks * a->ctx));
    if (a->json) {
      nlohmann::json j = {{"ppl", r.ppl}, {"nll", r.nll}, {"ctx", a->ctx}, {"n_chunks", r.n_chunks},
                          {"n_scored", r.n_scored}, {"n_tokens", r.n_tokens}, {"file", a->file}};
      if (!cache_use.is_null()) j["expert_cache"] = cache_use;
      std::printf("%s\n", json_text(j).c_str());
    } else {
      std::printf("perplexity: %.4f over %lld windows of %lld tokens (%lld tokens scored)\n", r.ppl,
                  static_cast<long long>(r.n_chunks), static_cast<long long>(a->ctx), static_cast<long long>(r.n_scored));
    }
  });
}

}  // namespace sy::cli
