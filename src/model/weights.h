// Every tensor a forward pass reads, bound by name from the GGUF file and checked
// against the hyperparameters (routed experts are bound by the expert store). Matrices stay in the file mapping; small vectors (norms,
// biases) are copied to float whatever their stored type.
#pragma once

#include <vector>

#include "base/weight_matrix.h"
#include "experts/ffn_weights.h"
#include "model/hparams.h"

namespace sy {

class GgufFile;

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;  // empty when the family has no bias
  std::vector<float> q_norm, k_norm;  // empty unless QkNorm != None
  std::vector<float> ffn_norm;

  FfnWeights dense;             // layers without experts
  WeightMatrix router;          // [n_expert rows x n_embd]
  FfnWeights shared_expert;     // empty when absent
  std::vector<float> shared_gate;  // [n_embd], qwen2moe's sigmoid gate for the shared expert
};

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab rows x n_embd]
  std::vector<float> output_norm;
  WeightMatrix output;      // token_embd when the file ties them
  std::vector<LayerWeights> layers;

  static ModelWeights bind(const GgufFile& f, const HParams& hp);
};

// A named tensor as a matrix of `rows` x `cols`, with its shape checked; throws an error
// naming the file and tensor otherwise.
WeightMatrix bind_matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows);
// A 3-D tensor [cols, rows, n] (one matrix per expert) as one matrix of rows * n rows.
WeightMatrix bind_matrix3(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows, int64_t n);
// True for routed-expert weights: `blk.N.ffn_*_exps.weight` or the older per-expert
// `blk.N.ffn_{gate,up,down}.E.weight` (shared experts are not routed).
bool is_routed_expert_tensor(const std::string& name);

std::vector<float> load_vector(const GgufFile& f, const std::string& name, int64_t n);

}  // namespace sy
