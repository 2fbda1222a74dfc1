#include "model/architecture.h"

#include "base/error.h"

namespace sy {
namespace {

using cpu::RopeType;

// Router rules per family (softmax over all experts, then top-k):
//  - Mixtral (llama with experts): top-k weights renormalised to sum to 1.
//  - Qwen1.5/2-MoE: not renormalised; a shared expert behind a sigmoid gate.
//  - Qwen3-MoE: renormalised (norm_topk_prob = true), no shared expert.
//  - OLMoE: not renormalised (norm_topk_prob = false).
//  - DeepSeek-MoE (v1): not renormalised; shared experts added ungated; leading dense layers.
constexpr ArchRules kRules[] = {
    {Arch::Llama, "llama", RopeType::Norm, QkNorm::None, true, false, false, false, false},
    {Arch::Qwen2Moe, "qwen2moe", RopeType::Neox, QkNorm::None, false, false, true, true, true},
    {Arch::Qwen3Moe, "qwen3moe", RopeType::Neox, QkNorm::PerHead, true, false, false, false, true},
    {Arch::Olmoe, "olmoe", RopeType::Neox, QkNorm::FullWidth, false, false, false, false, true},
    {Arch::Deepseek, "deepseek", RopeType::Norm, QkNorm::None, false, false, true, false, true},
};

}  // namespace

std::string supported_architectures() {
  std::string s;
  for (const ArchRules& r : kRules) s += (s.empty() ? "" : ", ") + std::string(r.gguf_name);
  return s;
}

const ArchRules& arch_rules(const std::string& name) {
  for (const ArchRules& r : kRules) {
    if (name == r.gguf_name) return r;
  }
  throw Error("unsupported architecture '" + name + "' (general.architecture); supported: " +
              supported_architectures());
}

}  // namespace sy
