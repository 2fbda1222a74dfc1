// switchyard info: what a model file holds.
#include <cstdio>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "cli/common.h"

namespace sy::cli {

void add_info(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false, metadata = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("info", "Architecture, hyperparameters, tensor types, parameter counts and memory");
  c->footer("Example: switchyard info -m model.gguf --json");
  c->add_option("-m,--model", a->model, "GGUF model file")->required();
  c->add_flag("--json", a->json, "Print as JSON");
  c->add_flag("--metadata", a->metadata, "Also list every metadata key");
  c->callback([a] {
    auto model = Model::load(a->model);
    const HParams& h = model->hparams();
    const GgufFile& f = model->file();
    int64_t total = 0, expert = 0;
    size_t weight_bytes = 0;
    std::map<std::string, std::pair<int64_t, size_t>> by_type;  // count, bytes
    for (const auto& t : f.tensors()) {
      total += t.n_elements();
      weight_bytes += t.n_bytes;
      if (is_routed_expert_tensor(t.name)) expert += t.n_elements();
      auto& e = by_type[dtype_name(t.dtype) + (t.packed ? " (packed)" : "")];
      e.first++;
      e.second += t.n_bytes;
    }
    const int64_t active = h.n_expert > 0 ? total - expert + expert / h.n_expert * h.n_expert_used : total;
    const size_t kv_per_token = static_cast<size_t>(h.n_layer) * (h.k_dim() + h.v_dim()) * sizeof(float);
    nlohmann::json j = {
        {"file", a->model}, {"gguf_version", f.version()}, {"file_bytes", f.file_size()},
        {"name", h.model_name}, {"architecture", h.arch_name},
        {"n_vocab", h.n_vocab}, {"n_ctx_train", h.n_ctx_train}, {"n_embd", h.n_embd}, {"n_layer", h.n_layer},
        {"n_head", h.n_head}, {"n_head_kv", h.n_head_kv}, {"head_dim", h.head_dim_k},
        {"n_ff", h.n_ff}, {"n_expert", h.n_expert}, {"n_expert_used", h.n_expert_used},
        {"n_ff_expert", h.n_ff_exp}, {"n_expert_shared", h.n_expert_shared}, {"n_ff_shared", h.n_ff_shexp},
        {"n_layer_dense_lead", h.n_layer_dense_lead},
        {"rope", {{"type", h.rope.type == cpu::RopeType::Norm ? "norm" : "neox"}, {"n_rot", h.rope.n_rot}, {"freq_base", h.rope.freq_base}}},
        {"rms_eps", h.rms_eps},
        {"tokenizer", {{"model", model->tokenizer().model_name()}, {"pre", model->tokenizer().pre_name()}}},
        {"params_total", total}, {"params_routed_experts", expert}, {"params_active_per_token", active},
        {"weight_bytes", weight_bytes}, {"kv_cache_bytes_per_token", kv_per_token}};
    for (auto& [type, e] : by_type) j["tensor_types"][type] = {{"tensors", e.first}, {"bytes", e.second}};
    if (a->metadata) {
      for (const auto& [k, v] : f.metadata()) j["metadata"][k] = v.to_string();
    }
    if (a->json) {
      std::printf("%s\n", json_text(j, 2).c_str());
      return;
    }
    std::printf("%s: %s (%s), GGUF v%u, %.2f MB\n", a->model.c_str(), h.arch_name.c_str(), h.model_name.c_str(), f.version(), f.file_size() / 1e6);
    std::printf("  layers %d, embedding %lld, heads %d (KV %d), head dim %d, vocab %lld, train context %lld\n", h.n_layer,
                (long long)h.n_embd, h.n_head, h.n_head_kv, h.head_dim_k, (long long)h.n_vocab, (long long)h.n_ctx_train);
    if (h.n_expert > 0) {
      std::printf("  experts %d, %d used per token, expert FFN %lld", h.n_expert, h.n_expert_used, (long long)h.n_ff_exp);
      if (h.n_ff_shexp > 0 && h.rules->shared_expert) std::printf(", shared expert FFN %lld", (long long)h.n_ff_shexp);
      if (h.n_layer_dense_lead > 0) std::printf(", %d leading dense layers", h.n_layer_dense_lead);
      std::printf("\n");
    }
    std::printf("  RoPE %s, %d dims, base %g; RMSNorm eps %g; tokenizer %s (pre: %s)\n",
                h.rope.type == cpu::RopeType::Norm ? "norm" : "neox", h.rope.n_rot, h.rope.freq_base, h.rms_eps,
                model->tokenizer().model_name().c_str(), model->tokenizer().pre_name().c_str());
    std::printf("  parameters: %lld total, %lld in routed experts, %lld active per token\n", (long long)total, (long long)expert, (long long)active);
    std::printf("  tensor types:");
    for (auto& [type, e] : by_type) std::printf(" %s x%lld (%.2f MB)", type.c_str(), (long long)e.first, e.second / 1e6);
    std::printf("\n  memory: weights %.2f MB (memory-mapped), KV cache %.1f KB per token (F32)\n", weight_bytes / 1e6, kv_per_token / 1e3);
    if (a->metadata) {
      for (const auto& [k, v] : f.metadata()) std::printf("  %s = %s\n", k.c_str(), v.to_string().c_str());
    }
  });
}

}  // namespace sy::cli
