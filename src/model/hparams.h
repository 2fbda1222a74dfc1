// Hyperparameters read from `general.architecture` and its `<arch>.*` keys.
#pragma once

#include <cstdint>
#include <string>

#include "model/architecture.h"

namespace sy {

class GgufFile;

struct HParams {
  const ArchRules* rules = nullptr;
  std::string arch_name;
  std::string model_name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  int64_t n_ff = 0;          // dense FFN width
  int64_t n_ff_exp = 0;      // routed expert FFN width
  int64_t n_ff_shexp = 0;    // shared expert FFN width (all shared experts together)
  int n_expert = 0;
  int n_expert_used = 0;
  int n_expert_shared = 0;
  int n_layer_dense_lead = 0;
  float expert_weights_scale = 1.0f;
  float rms_eps = 1e-5f;
  cpu::RopeParams rope;

  bool is_moe() const { return n_expert > 0; }
  bool layer_is_moe(int layer) const { return is_moe() && layer >= n_layer_dense_lead; }
  int64_t q_dim() const { return static_cast<int64_t>(n_head) * head_dim_k; }
  int64_t k_dim() const { return static_cast<int64_t>(n_head_kv) * head_dim_k; }
  int64_t v_dim() const { return static_cast<int64_t>(n_head_kv) * head_dim_v; }

  // Throws sy::Error naming the file and key for anything missing or inconsistent.
  static HParams from_gguf(const GgufFile& f);
};

}  // namespace sy
