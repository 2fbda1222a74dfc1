// switchyard synth: random-weight GGUF models of real shapes, for benchmarks.
#include <cstdio>
#include <memory>
#include <string>

#include "base/error.h"
#include "cli/common.h"
#include "cli/progress_bar.h"
#include "model/synth.h"

namespace sy::cli {
namespace {

std::string count(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, n >= 1e9 ? "%.2fB" : "%.2fM", n >= 1e9 ? n / 1e9 : n / 1e6);
  return buf;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::string preset_list() {
  std::string s = "Presets:\n";
  for (const SynthPreset& p : synth_presets()) {
    s += "  " + p.name + std::string(p.name.size() < 16 ? 16 - p.name.size() : 1, ' ') + p.summary + "\n";
  }
  return s;
}

}  // namespace

void add_synth(CLI::App& app) {
  struct Args {
    std::string preset, output, type = "f16", arch, vocab, name;
    uint64_t seed = 0;
    double skew = 0.0;
    int threads = 0;
    int64_t layers = 0, experts = 0, used = 0, embd = 0, ff = 0, ff_shared = 0, heads = 0, heads_kv = 0,
            ctx = 0, vocab_size = 0;
    bool no_progress = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "synth", "Write a random-weight GGUF model of a real shape (llama.cpp loads it too), for benchmarks");
  c->footer(preset_list() +
            "\nWeights: --type applies to every 2-D/3-D weight (token_embd and output included); routers "
            "(ffn_gate_inp*)\n"
            "and 1-D tensors (norms, biases) are always F32. Without --vocab FILE the file gets a "
            "synthesized byte-level\n"
            "BPE vocabulary (gpt2, pre-tokenizer default); a vocabulary from FILE is padded with <|pad_N|> "
            "tokens or\n"
            "truncated to the model's vocabulary size.\n\n"
            "Example: switchyard synth --preset olmoe-1b-7b --type q4_0 --router-skew 1 -o olmoe-q4_0.gguf\n"
            "         switchyard synth --preset tiny --arch qwen2moe --experts 16 --type q8_0 -o tiny.gguf");
  std::vector<std::string> names;
  for (const SynthPreset& p : synth_presets()) names.push_back(p.name);
  c->add_option("--preset", a->preset, "Model shape (list below)")->required()->check(CLI::IsMember(names));
  c->add_option("-o,--output", a->output, "GGUF file to write")->required();
  c->add_option("--type", a->type, "Weight type: f32, f16 (default), bf16, q8_0, q4_0");
  c->add_option("--seed", a->seed, "Random seed; the same seed gives the same file (default 0)")
      ->check(non_negative_number());
  CLI::Option* skew = c->add_option("--router-skew", a->skew,
                "Make a few experts hot in every layer: the expert of rank j gets about 2*S/(j+1) std more "
                "router logit "
                "(0 = uniform routing, default)")
      ->check(non_negative_number());
  c->add_option("--name", a->name, "general.name (default: the preset name)");
  c->add_option("-t,--threads", a->threads, "Worker threads (default: the CPUs this process may use)")
      ->check(CLI::Range(1, 1024));
  c->add_flag("--no-progress", a->no_progress, "No progress bar");
  // Shape overrides (the preset's value otherwise).
  c->add_option("--arch", a->arch, "general.architecture: llama, olmoe, qwen2moe, qwen3moe");
  CLI::Option* layers = c->add_option("--layers", a->layers, "Number of layers");
  CLI::Option* experts =
      c->add_option("--experts", a->experts, "Routed experts per layer (llama: 0 = dense)");
  CLI::Option* used = c->add_option("--experts-used", a->used, "Experts per token (top-k)");
  CLI::Option* embd = c->add_option("--embd", a->embd, "Embedding width");
  CLI::Option* ff = c->add_option("--ff", a->ff, "Expert FFN width (the dense FFN width without experts)");
  CLI::Option* ff_shared = c->add_option(
      "--ff-shared", a->ff_shared, "Shared expert FFN width (qwen2moe; default: the preset's, else twice --ff)");
  CLI::Option* heads = c->add_option("--heads", a->heads, "Attention heads");
  CLI::Option* heads_kv = c->add_option("--heads-kv", a->heads_kv, "KV heads");
  CLI::Option* ctx = c->add_option("--ctx", a->ctx, "<arch>.context_length");
  c->add_option("--vocab", a->vocab, "Vocabulary size N, or a GGUF FILE whose tokenizer.* keys are copied");
  CLI::Option* vocab_size =
      c->add_option("--vocab-size", a->vocab_size, "Vocabulary size (with --vocab FILE)");

  c->callback([=] {
    const SynthPreset& preset = synth_preset(a->preset);
    SynthOptions o;
    o.shape = preset.shape;
    o.name = a->name.empty() ? preset.name : a->name;
    try {
      o.type = parse_dtype(a->type);
    } catch (const Error& e) {
      throw Error(std::string("--type: ") + e.what());
    }
    o.seed = a->seed;
    o.router_skew = a->skew;
    SynthShape& s = o.shape;
    auto set_int = [](CLI::Option* opt, int& field, int64_t v, const char* flag) {
      if (opt->count() == 0) return;
      if (v < 0 || v > (int64_t{1} << 30))
        throw Error(std::string(flag) + " " + std::to_string(v) + " is out of range");
      field = static_cast<int>(v);
    };
    auto set_i64 = [](CLI::Option* opt, int64_t& field, int64_t v) {
      if (opt->count() > 0) field = v;
    };
    if (!a->arch.empty()) s.arch = a->arch;
    set_int(layers, s.n_layer, a->layers, "--layers");
    set_int(experts, s.n_expert, a->experts, "--experts");
    set_int(used, s.n_expert_used, a->used, "--experts-used");
    set_int(heads, s.n_head, a->heads, "--heads");
    set_int(heads_kv, s.n_head_kv, a->heads_kv, "--heads-kv");
    if (embd->count() > 0 || heads->count() > 0) s.head_dim = 0;  // follows --embd / --heads
    set_i64(embd, s.n_embd, a->embd);
    set_i64(ff, s.n_ff, a->ff);
    set_i64(ff_shared, s.n_ff_shexp, a->ff_shared);
    set_i64(ctx, s.n_ctx, a->ctx);
    if (all_digits(a->vocab)) {
      if (vocab_size->count() > 0)
        throw Error("--vocab " + a->vocab + " and --vocab-size both give the vocabulary size; use one");
      s.n_vocab = std::stoll(a->vocab);
    } else {
      o.vocab_file = a->vocab;
      set_i64(vocab_size, s.n_vocab, a->vocab_size);
    }
    // Qwen2-MoE from a preset without a shared expert: twice an expert's width, as Qwen1.5-MoE has
    // (its shared expert is four 1408-wide experts' width, 5632).
    if (s.arch == "qwen2moe" && s.n_ff_shexp == 0 && ff_shared->count() == 0) s.n_ff_shexp = 2 * s.n_ff;
    // Settings that the shape chosen has no place for would be written nowhere.
    if (ff_shared->count() > 0 && s.arch != "qwen2moe")
      throw Error("--ff-shared: " + s.arch + " has no shared expert (only qwen2moe does here)");
    if (s.n_expert == 0 && (used->count() > 0 || skew->count() > 0))
      throw Error(std::string(used->count() > 0 ? "--experts-used" : "--router-skew") +
                  ": the model is dense (--experts 0), it has no router");
    validate_synth(o);

    ThreadPool pool(a->threads > 0 ? a->threads : ThreadPool::default_threads());
    ProgressBar bar;
    std::function<void(uint64_t, uint64_t)> progress;
    if (!a->no_progress) progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); };
    const SynthStats st = write_synth_model(a->output, o, pool, progress);
    const double secs = bar.seconds();
    std::printf("wrote %s: %s %s, %zu tensors, %s parameters, %.3f GB in %.1f s (%.0f MB/s)\n",
                a->output.c_str(), s.arch.c_str(), dtype_name(o.type).c_str(), st.n_tensors,
                count(double(st.n_params)).c_str(), st.file_bytes / 1e9, secs,
                secs > 0 ? st.file_bytes / 1e6 / secs : 0.0);
  });
}

}  // namespace sy::cli
