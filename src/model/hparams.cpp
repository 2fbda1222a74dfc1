#include "model/hparams.h"

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "moe/router.h"

namespace sy {
namespace {

int to_int(const GgufFile& f, const std::string& key, uint64_t v) {
  if (v > (1u << 30)) throw Error(f.path() + ": metadata '" + key + "' = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

void check(const GgufFile& f, bool ok, const std::string& what) {
  if (!ok) throw Error(f.path() + ": inconsistent hyperparameters: " + what);
}

}  // namespace

HParams HParams::from_gguf(const GgufFile& f) {
  HParams h;
  h.arch_name = f.get_string("general.architecture");
  try {
    h.rules = &arch_rules(h.arch_name);
  } catch (const Error& e) {
    throw Error(f.path() + ": " + e.what());
  }
  h.model_name = f.get_string("general.name", "");
  const std::string a = h.arch_name + ".";
  auto get = [&](const std::string& key) { return to_int(f, a + key, f.get_uint(a + key)); };
  auto get_or = [&](const std::string& key, int64_t def) {
    return to_int(f, a + key, f.get_uint(a + key, static_cast<uint64_t>(def)));
  };

  h.n_embd = get("embedding_length");
  h.n_layer = get("block_count");
  h.n_head = get("attention.head_count");
  h.n_head_kv = get_or("attention.head_count_kv", h.n_head);
  h.n_ctx_train = get_or("context_length", 4096);
  h.n_ff = get_or("feed_forward_length", 0);
  check(f, h.n_embd > 0 && h.n_layer > 0 && h.n_head > 0 && h.n_head_kv > 0, "embedding_length, block_count and head counts must be positive");
  check(f, h.n_head % h.n_head_kv == 0, "attention.head_count must be a multiple of attention.head_count_kv");
  const int64_t head_dim = h.n_embd / h.n_head;
  h.head_dim_k = get_or("attention.key_length", head_dim);
  h.head_dim_v = get_or("attention.value_length", head_dim);
  check(f, h.head_dim_k > 0 && h.head_dim_v > 0, "head dimensions must be positive");

  h.n_expert = get_or("expert_count", 0);
  h.n_expert_used = get_or("expert_used_count", 0);
  if (h.rules->arch == Arch::Deepseek) {
    // DeepSeek-MoE sizes its shared experts as n_expert_shared routed-expert widths, and
    // llama.cpp requires these keys.
    h.n_ff_exp = get("expert_feed_forward_length");
    h.n_expert_shared = get("expert_shared_count");
    h.n_ff_shexp = h.n_ff_exp * h.n_expert_shared;
    h.n_layer_dense_lead = get("leading_dense_block_count");
  } else {
    // Without the width keys, llama.cpp sizes Qwen's experts as feed_forward_length / top-k
    // and Qwen2-MoE's shared expert as feed_forward_length (older Qwen1.5-MoE conversions
    // have neither key); Mixtral and OLMoE experts are feed_forward_length wide.
    const bool qwen = h.rules->arch == Arch::Qwen2Moe || h.rules->arch == Arch::Qwen3Moe;
    const int64_t ff_per_expert = qwen && h.n_expert_used > 0 ? h.n_ff / h.n_expert_used : h.n_ff;
    h.n_ff_exp = get_or("expert_feed_forward_length", ff_per_expert);
    h.n_expert_shared = get_or("expert_shared_count", h.rules->shared_expert ? 1 : 0);
    const int64_t ff_shared = h.rules->arch == Arch::Qwen2Moe ? h.n_ff : h.n_ff_exp * h.n_expert_shared;
    h.n_ff_shexp = get_or("expert_shared_feed_forward_length", ff_shared);
    h.n_layer_dense_lead = get_or("leading_dense_block_count", 0);
  }
  h.expert_weights_scale = static_cast<float>(f.get_float(a + "expert_weights_scale", 1.0));
  if (h.rules->requires_experts) check(f, h.n_expert > 0, h.arch_name + " is a mixture-of-experts family but " + a + "expert_count is missing or 0");
  if (h.n_expert > 0) {
    check(f, h.n_expert_used > 0 && h.n_expert_used <= h.n_expert, "expert_used_count must be in 1..expert_count");
    check(f, h.n_expert <= kMaxRouterExperts,
          "expert_count " + std::to_string(h.n_expert) + " is above the " + std::to_string(kMaxRouterExperts) +
              " experts per layer that the router supports");
    check(f, h.n_ff_exp > 0, "expert_feed_forward_length (or feed_forward_length) must be positive");
  }
  check(f, h.n_layer_dense_lead <= h.n_layer, "leading_dense_block_count exceeds block_count");

  h.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
  h.rope.type = h.rules->rope;
  h.rope.freq_base = static_cast<float>(f.get_float(a + "rope.freq_base", 10000.0));
  h.rope.n_rot = get_or("rope.dimension_count", h.head_dim_k);
  check(f, h.rope.n_rot % 2 == 0 && h.rope.n_rot <= h.head_dim_k && h.rope.n_rot <= cpu::kMaxRopeDims, "rope.dimension_count must be even and at most the head dimension");
  // As llama.cpp: a factor without a type is linear scaling, older files give it as
  // rope.scale_linear, a factor of 0 means none, and the type "none" never scales.
  const std::string scaling = f.get_string(a + "rope.scaling.type", "linear");
  if (scaling == "linear") {
    double factor = f.get_float(a + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = f.get_float(a + "rope.scale_linear", 0.0);
    check(f, factor >= 0, "rope.scaling.factor must not be negative");
    h.rope.freq_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
  } else if (scaling != "none") {
    throw Error(f.path() + ": RoPE scaling '" + scaling + "' is not supported (supported: none, linear)");
  }

  if (f.has(a + "vocab_size")) {
    h.n_vocab = get("vocab_size");
  } else if (f.has("tokenizer.ggml.tokens")) {
    h.n_vocab = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  } else {
    h.n_vocab = f.tensor("token_embd.weight").dim(1);
  }
  return h;
}

}  // namespace sy
