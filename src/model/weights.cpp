#include "model/weights.h"

#include <algorithm>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "kernels/cpu/weight_prep.h"

namespace sy {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void expect_shape(const GgufFile& f, const GgufTensorInfo& t, const std::vector<int64_t>& want) {
  std::vector<int64_t> got = t.shape;
  while (got.size() > want.size() && got.back() == 1) got.pop_back();
  if (got != want) {
    throw Error(f.path() + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) +
                " but the model's hyperparameters need " + shape_str(want) +
                " (file and metadata disagree)");
  }
}

std::string blk(int il, const std::string& what) { return "blk." + std::to_string(il) + "." + what; }

FfnWeights bind_ffn(const GgufFile& f, int il, const std::string& suffix, int64_t n_embd, int64_t n_ff) {
  FfnWeights w;
  w.gate = bind_matrix(f, blk(il, "ffn_gate" + suffix + ".weight"), n_embd, n_ff);
  w.up = bind_matrix(f, blk(il, "ffn_up" + suffix + ".weight"), n_embd, n_ff);
  w.down = bind_matrix(f, blk(il, "ffn_down" + suffix + ".weight"), n_ff, n_embd);
  return w;
}

std::vector<float> optional_vector(const GgufFile& f, const std::string& name, int64_t n) {
  return f.find_tensor(name) ? load_vector(f, name, n) : std::vector<float>{};
}

}  // namespace

WeightMatrix bind_matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensorInfo& t = f.tensor(name);
  expect_shape(f, t, {cols, rows});
  return WeightMatrix{t.dtype, rows, cols, t.data, name, t.packed};
}

WeightMatrix bind_matrix3(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows, int64_t n) {
  const GgufTensorInfo& t = f.tensor(name);
  expect_shape(f, t, {cols, rows, n});
  return WeightMatrix{t.dtype, rows * n, cols, t.data, name, t.packed};
}

bool is_routed_expert_tensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos) return true;
  return name.find(".ffn_") != std::string::npos && name.find("shexp") == std::string::npos &&
         std::count(name.begin(), name.end(), '.') == 4;  // blk.N.ffn_gate.E.weight
}

std::vector<float> load_vector(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensorInfo& t = f.tensor(name);
  expect_shape(f, t, {n});
  std::vector<float> v(n);
  cpu::weight_row_to_f32(WeightMatrix{t.dtype, 1, n, t.data, name, t.packed}, 0, v.data());
  return v;
}

ModelWeights ModelWeights::bind(const GgufFile& f, const HParams& hp) {
  // llama.cpp scales each RoPE frequency by this tensor (Llama 3.1's long-context RoPE);
  // running without it would give other logits, not an error.
  if (f.find_tensor("rope_freqs.weight")) {
    throw Error(f.path() + ": the tensor 'rope_freqs.weight' (per-dimension RoPE frequency factors, as Llama 3.1 "
                           "files have) is not supported; this engine runs the MoE families' plain or linearly "
                           "scaled RoPE");
  }
  ModelWeights w;
  const int64_t d = hp.n_embd;
  w.token_embd = bind_matrix(f, "token_embd.weight", d, hp.n_vocab);
  w.output_norm = load_vector(f, "output_norm.weight", d);
  w.output = f.find_tensor("output.weight") ? bind_matrix(f, "output.weight", d, hp.n_vocab) : w.token_embd;

  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights l;
    l.attn_norm = load_vector(f, blk(il, "attn_norm.weight"), d);
    l.wq = bind_matrix(f, blk(il, "attn_q.weight"), d, hp.q_dim());
    l.wk = bind_matrix(f, blk(il, "attn_k.weight"), d, hp.k_dim());
    l.wv = bind_matrix(f, blk(il, "attn_v.weight"), d, hp.v_dim());
    l.wo = bind_matrix(f, blk(il, "attn_output.weight"), int64_t{hp.n_head} * hp.head_dim_v, d);
    l.bq = optional_vector(f, blk(il, "attn_q.bias"), hp.q_dim());
    l.bk = optional_vector(f, blk(il, "attn_k.bias"), hp.k_dim());
    l.bv = optional_vector(f, blk(il, "attn_v.bias"), hp.v_dim());
    l.bo = optional_vector(f, blk(il, "attn_output.bias"), d);
    if (hp.rules->qk_norm == QkNorm::PerHead) {
      l.q_norm = load_vector(f, blk(il, "attn_q_norm.weight"), hp.head_dim_k);
      l.k_norm = load_vector(f, blk(il, "attn_k_norm.weight"), hp.head_dim_k);
    } else if (hp.rules->qk_norm == QkNorm::FullWidth) {
      l.q_norm = load_vector(f, blk(il, "attn_q_norm.weight"), hp.q_dim());
      l.k_norm = load_vector(f, blk(il, "attn_k_norm.weight"), hp.k_dim());
    }
    l.ffn_norm = load_vector(f, blk(il, "ffn_norm.weight"), d);

    if (hp.layer_is_moe(il)) {
      l.router = bind_matrix(f, blk(il, "ffn_gate_inp.weight"), d, hp.n_expert);
      if (hp.rules->shared_expert && hp.n_ff_shexp > 0) {
        l.shared_expert = bind_ffn(f, il, "_shexp", d, hp.n_ff_shexp);
        if (hp.rules->shared_expert_gate) l.shared_gate = load_vector(f, blk(il, "ffn_gate_inp_shexp.weight"), d);
      }
    } else {
      if (hp.n_ff <= 0) throw Error(f.path() + ": layer " + std::to_string(il) + " is dense but feed_forward_length is missing");
      l.dense = bind_ffn(f, il, "", d, hp.n_ff);
    }
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace sy
