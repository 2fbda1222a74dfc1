// The model families switchyard runs and the rules that tell them apart. Each family is
// implemented from its published definition (Hugging Face modeling code) and checked
// against llama.cpp's logits.
#pragma once

#include <string>

#include "kernels/cpu/ops.h"

namespace sy {

enum class Arch { Llama, Qwen2Moe, Qwen3Moe, Olmoe, Deepseek };

// Where a family normalises Q and K before RoPE.
enum class QkNorm {
  None,
  PerHead,    // RMSNorm over each head's head_dim values (Qwen3-MoE)
  FullWidth,  // RMSNorm over all heads together (OLMoE)
};

struct ArchRules {
  Arch arch;
  const char* gguf_name;
  cpu::RopeType rope;
  QkNorm qk_norm;
  bool renormalize_topk;   // divide the selected experts' softmax weights by their sum
  bool scale_expert_weights;  // multiply them by `<arch>.expert_weights_scale`
  bool shared_expert;      // ffn_*_shexp tensors present in MoE layers
  bool shared_expert_gate; // sigmoid(ffn_gate_inp_shexp . x) scales the shared expert
  bool requires_experts;   // the family is MoE by definition
};

// Throws sy::Error listing the supported families for an unknown name.
const ArchRules& arch_rules(const std::string& gguf_name);
std::string supported_architectures();

}  // namespace sy
