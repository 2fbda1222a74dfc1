// The two code paths without a llama.cpp fixture, dense `llama` and `deepseek`, checked
// against fixture-verified ones (tests/model/fixture_cases_test.cpp): each test rewrites
// a fixture model into a file of the other family that must compute the same function,
// so the logits agree up to float rounding.
//  - dense llama == Mixtral whose experts are all copies of expert 0 (Mixtral renormalises
//    its top-2 weights to sum 1, so the MoE output is that one FFN);
//  - deepseek == Qwen2-MoE whose shared-expert gate is zero (sigmoid(0) = 0.5, folded into
//    ffn_down_shexp), with attn_q/attn_k rows permuted from NEOX to NORM RoPE order, which
//    is what llama.cpp's deepseek (LLAMA_ROPE_TYPE_NORM) expects of a converted file;
//  - a deepseek leading dense layer == a Qwen2-MoE layer whose router is zero (uniform
//    softmax: top-4 of 8 weights 1/8 each) and whose experts are identical, so the MoE
//    output is 0.5 E(x) + 0.5 S(x): one dense SwiGLU over the concatenated hidden units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_writer.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

// |a - b| <= kRelTol * max|a| per logits row. Both sides run the same kernels in float32;
// only summation order differs (permuted q/k dimensions, a concatenated FFN, w1*y + w2*y
// with w1 + w2 = 1), which moves logits by a few ulp of the row's range.
constexpr double kRelTol = 1e-5;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
  std::vector<float> v;

  int64_t row_len() const { return shape.size() == 1 ? 1 : shape[0]; }
  int64_t n_rows() const { return static_cast<int64_t>(v.size()) / row_len(); }
};

// A model file being rewritten: metadata copied from a source file (with edits) and its
// tensors as float32 (every fixture model is F32).
class Draft {
 public:
  explicit Draft(const std::string& path) : src_(GgufFile::open(path)) {
    for (const auto& [key, value] : src_->metadata()) {
      if (key != "general.alignment") meta_.push_back({key, &value, {}});
    }
    for (const GgufTensorInfo& t : src_->tensors()) {
      if (t.dtype != DType::F32) throw Error(path + ": tensor '" + t.name + "' is not F32");
      Tensor c{t.name, t.shape, std::vector<float>(static_cast<size_t>(t.n_elements()))};
      std::memcpy(c.v.data(), t.data, t.n_bytes);
      tensors_.push_back(std::move(c));
    }
  }

  uint64_t get_uint(const std::string& key) const { return src_->get_uint(key); }
  void erase_key(const std::string& key) {
    std::erase_if(meta_, [&](const Meta& m) { return m.key == key; });
  }
  void set_u32(const std::string& key, uint32_t v) {
    set(key, [v](GgufWriter& w, const std::string& k) { w.add_uint32(k, v); });
  }
  void set_f32(const std::string& key, float v) {
    set(key, [v](GgufWriter& w, const std::string& k) { w.add_float32(k, v); });
  }
  void set_str(const std::string& key, std::string v) {
    set(key, [v](GgufWriter& w, const std::string& k) { w.add_string(k, v); });
  }
  // Renames every key starting with `from` (e.g. "qwen2moe." -> "deepseek.").
  void rename_prefix(const std::string& from, const std::string& to) {
    for (Meta& m : meta_) {
      if (m.key.starts_with(from)) m.key = to + m.key.substr(from.size());
    }
  }

  bool has(const std::string& name) { return find(name) != nullptr; }
  Tensor& at(const std::string& name) {
    Tensor* t = find(name);
    if (!t) throw Error("test draft has no tensor '" + name + "'");
    return *t;
  }
  void erase(const std::string& name) {
    std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
  }
  void put(Tensor t) {
    Tensor* old = find(t.name);
    old ? void(*old = std::move(t)) : tensors_.push_back(std::move(t));
  }

  void write(const std::string& path) const {
    GgufWriter w;
    for (const Meta& m : meta_) m.copy ? w.add_value(m.key, *m.copy) : m.add(w, m.key);
    for (const Tensor& t : tensors_) {
      std::vector<uint8_t> bytes(t.v.size() * sizeof(float));
      std::memcpy(bytes.data(), t.v.data(), bytes.size());
      w.add_tensor(t.name, DType::F32, t.shape, std::move(bytes));
    }
    w.write(path);
  }

 private:
  struct Meta {
    std::string key;
    const GgufValue* copy = nullptr;  // points into src_, kept alive by the shared_ptr
    std::function<void(GgufWriter&, const std::string&)> add;
  };
  template <class F>
  void set(const std::string& key, F add) {
    erase_key(key);
    meta_.push_back({key, nullptr, add});
  }
  Tensor* find(const std::string& name) {
    for (Tensor& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }

  std::shared_ptr<const GgufFile> src_;
  std::vector<Meta> meta_;
  std::vector<Tensor> tensors_;
};

std::string blk(int il, const std::string& what) {
  return "blk." + std::to_string(il) + "." + what;
}

// Matrix e of a 3-D expert tensor [cols, rows, n_expert] as a 2-D tensor.
Tensor slice3(const Tensor& t, int e, const std::string& name) {
  const int64_t n = t.shape[0] * t.shape[1];
  return {name, {t.shape[0], t.shape[1]}, std::vector<float>(t.v.begin() + e * n, t.v.begin() + (e + 1) * n)};
}

void copy_expert0_to_all(Tensor& t) {
  const int64_t n = t.shape[0] * t.shape[1];
  for (int64_t e = 1; e < t.shape[2]; ++e) std::copy(t.v.begin(), t.v.begin() + n, t.v.begin() + e * n);
}

void scale(Tensor& t, float s) {
  for (float& x : t.v) x *= s;  // s is a power of two here: exact
}

void zero(Tensor& t) {
  std::fill(t.v.begin(), t.v.end(), 0.0f);
}

// Rows of a q/k weight or bias, per head of head_dim d, from NEOX order (RoPE pairs
// (i, i + d/2)) to NORM order (pairs (2i, 2i+1)): new row 2i <- old i, 2i+1 <- old i + d/2.
// This is the permutation llama.cpp's HF converter applies to LLaMA-style q/k weights.
void permute_neox_to_norm(Tensor& t, int64_t head_dim) {
  const int64_t len = t.row_len(), half = head_dim / 2;
  ASSERT_EQ(t.n_rows() % head_dim, 0) << t.name;
  std::vector<float> out(t.v.size());
  for (int64_t h = 0; h < t.n_rows() / head_dim; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      const float* a = &t.v[(h * head_dim + i) * len];
      const float* b = &t.v[(h * head_dim + i + half) * len];
      std::copy(a, a + len, &out[(h * head_dim + 2 * i) * len]);
      std::copy(b, b + len, &out[(h * head_dim + 2 * i + 1) * len]);
    }
  }
  t.v = std::move(out);
}

// Stacks the rows of b under those of a (gate/up projections: more hidden units).
Tensor concat_rows(const Tensor& a, const Tensor& b, const std::string& name) {
  Tensor r{name, {a.shape[0], a.shape[1] + b.shape[1]}, a.v};
  r.v.insert(r.v.end(), b.v.begin(), b.v.end());
  return r;
}

// Appends b's columns to a's (down projections: more hidden units as inputs).
Tensor concat_cols(const Tensor& a, const Tensor& b, const std::string& name) {
  Tensor r{name, {a.shape[0] + b.shape[0], a.shape[1]}, {}};
  for (int64_t row = 0; row < a.shape[1]; ++row) {
    r.v.insert(r.v.end(), a.v.begin() + row * a.shape[0], a.v.begin() + (row + 1) * a.shape[0]);
    r.v.insert(r.v.end(), b.v.begin() + row * b.shape[0], b.v.begin() + (row + 1) * b.shape[0]);
  }
  return r;
}

// Zero-pads every expert of a 3-D tensor to `to` hidden units: extra rows for gate/up
// ([n_embd, ff, n]), extra columns for down ([ff, n_embd, n]). silu(0) * 0 = 0, so the
// padded units add exact zeros.
void pad_experts(Tensor& t, bool down, int64_t to) {
  // After every `block` values, `extra` zeros.
  const int64_t block = down ? t.shape[0] : t.shape[0] * t.shape[1];
  const int64_t extra = down ? to - t.shape[0] : (to - t.shape[1]) * t.shape[0];
  std::vector<float> out;
  for (auto it = t.v.begin(); it != t.v.end(); it += block) {
    out.insert(out.end(), it, it + block);
    out.resize(out.size() + extra, 0.0f);
  }
  t.shape[down ? 0 : 1] = to;
  t.v = std::move(out);
}

// Writes a draft to a temporary file and loads it.
struct Built {
  test::TempFile file;
  std::unique_ptr<Model> model;
};
std::unique_ptr<Built> build(const Draft& d) {
  auto b = std::make_unique<Built>();
  d.write(b->file.path());
  b->model = Model::load(b->file.path());
  return b;
}

std::string load_error(const Draft& d) {
  test::TempFile f;
  d.write(f.path());
  try {
    Model::load(f.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

// Logits of every prompt position, then of `n_decode` tokens decoded one at a time through
// the KV cache. The tokens fed back are `feed` (so two models see the same input even if a
// near-tie made their argmax differ); empty: greedy on this model's own logits.
struct Trace {
  std::vector<std::vector<float>> rows;
  std::vector<int32_t> decoded;
};
Trace trace(const Model& m, const std::vector<int32_t>& prompt, int n_decode,
            const std::vector<int32_t>& feed = {}) {
  ThreadPool pool(2);
  Session s(m, pool, 256);
  const int64_t nv = m.hparams().n_vocab;
  Trace t;
  s.eval(prompt, true);
  for (size_t r = 0; r < prompt.size(); ++r) t.rows.emplace_back(s.logits(r), s.logits(r) + nv);
  for (int i = 0; i < n_decode; ++i) {
    const std::vector<float>& last = t.rows.back();
    const int32_t next = feed.empty()
                             ? static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin())
                             : feed[i];
    t.decoded.push_back(next);
    s.eval({next});
    t.rows.emplace_back(s.logits(0), s.logits(0) + nv);
  }
  return t;
}

// Worst |a - b| / max|a| over all rows.
double worst_rel_diff(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.rows.size(), b.rows.size());
  double worst = 0;
  for (size_t r = 0; r < std::min(a.rows.size(), b.rows.size()); ++r) {
    double amax = 0, dmax = 0;
    for (size_t i = 0; i < a.rows[r].size(); ++i) {
      amax = std::max(amax, std::fabs(double{a.rows[r][i]}));
      dmax = std::max(dmax, std::fabs(double{a.rows[r][i]} - b.rows[r][i]));
    }
    EXPECT_GT(amax, 0.0) << "row " << r << " is all zeros";
    worst = std::max(worst, dmax / amax);
  }
  return worst;
}

std::vector<int32_t> pseudo_random_tokens(int n, int32_t n_vocab, uint32_t seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(n_vocab)));
  }
  return t;
}

// Compares two models on a few prompts, each followed by greedy decoding through the cache.
void expect_same_logits(const Model& ref, const Model& got,
                        const std::vector<std::vector<int32_t>>& prompts) {
  for (const auto& prompt : prompts) {
    const Trace a = trace(ref, prompt, 6);
    const Trace b = trace(got, prompt, 6, a.decoded);
    const double worst = worst_rel_diff(a, b);
    EXPECT_LE(worst, kRelTol) << "prompt of " << prompt.size() << " tokens";
    // The decoded tokens are the same (greedy on `got` too), barring a near-tie.
    EXPECT_EQ(trace(got, prompt, 6).decoded, a.decoded);
  }
}

// ---------------------------------------------------------------------------------------
// 1. Dense llama == Mixtral with identical experts.

std::vector<std::vector<int32_t>> mixtral_prompts() {
  return {{1, 15043, 3186, 29892, 920, 526, 366, 9826, 29973},
          {1, 0, 31999, 2, 450, 4996, 17354},
          pseudo_random_tokens(40, 32000, 7)};
}

TEST(FamilyLlamaDense, EqualsMixtralWithIdenticalExperts) {
  const std::string src = test::shared_path("fixtures/mixtral/model.gguf");
  Draft moe(src);
  const int n_layer = static_cast<int>(moe.get_uint("llama.block_count"));
  for (int il = 0; il < n_layer; ++il) {
    for (const char* w : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
      copy_expert0_to_all(moe.at(blk(il, w)));
  }

  Draft dense(src);
  dense.erase_key("llama.expert_count");
  dense.erase_key("llama.expert_used_count");
  const int64_t n_ff_exp = dense.at(blk(0, "ffn_gate_exps.weight")).shape[1];
  dense.set_u32("llama.feed_forward_length", static_cast<uint32_t>(n_ff_exp));
  for (int il = 0; il < n_layer; ++il) {
    for (const std::string w : {"ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string exps = blk(il, w + "_exps.weight");
      dense.put(slice3(dense.at(exps), 0, blk(il, w + ".weight")));
      dense.erase(exps);
    }
    dense.erase(blk(il, "ffn_gate_inp.weight"));
  }

  auto a = build(moe), b = build(dense);
  ASSERT_TRUE(a->model->hparams().is_moe());
  ASSERT_FALSE(b->model->hparams().is_moe());
  EXPECT_EQ(b->model->hparams().n_ff, n_ff_exp);
  expect_same_logits(*a->model, *b->model, mixtral_prompts());
}

TEST(FamilyLlamaDense, MissingDenseTensorIsNamed) {
  Draft dense(test::shared_path("fixtures/mixtral/model.gguf"));
  dense.erase_key("llama.expert_count");
  dense.erase_key("llama.expert_used_count");
  const std::string e = load_error(dense);  // the file still has only expert tensors
  EXPECT_NE(e.find("'blk.0.ffn_gate.weight'"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------------------
// 2. DeepSeek == Qwen2-MoE with a zero shared-expert gate.

std::vector<std::vector<int32_t>> qwen_prompts() {
  return {{50256, 15496, 995, 11, 703, 389, 345, 30},
          {0, 50256, 13, 198, 464, 2068},
          pseudo_random_tokens(48, 50257, 11)};
}

struct DeepseekOptions {
  bool permute_qk = true;      // false only for the negative control
  int shared_count = 2;        // 2: shared FFN 128 = 2 x 64; 1: experts zero-padded to 128
  float weights_scale = 1.0f;  // deepseek.expert_weights_scale, which DeepSeek v1 ignores
};

// The Qwen2-MoE fixture with every ffn_gate_inp_shexp zeroed: the shared expert is
// scaled by sigmoid(0) = 0.5.
Draft qwen_zero_gate() {
  Draft d(test::shared_path("fixtures/qwen2moe/model.gguf"));
  const int n_layer = static_cast<int>(d.get_uint("qwen2moe.block_count"));
  for (int il = 0; il < n_layer; ++il) zero(d.at(blk(il, "ffn_gate_inp_shexp.weight")));
  return d;
}

// The same function as a deepseek file (see the header comment).
Draft to_deepseek(Draft d, const DeepseekOptions& o) {
  const int n_layer = static_cast<int>(d.get_uint("qwen2moe.block_count"));
  const int64_t n_embd = static_cast<int64_t>(d.get_uint("qwen2moe.embedding_length"));
  const int64_t head_dim = n_embd / static_cast<int64_t>(d.get_uint("qwen2moe.attention.head_count"));
  d.rename_prefix("qwen2moe.", "deepseek.");
  d.set_str("general.architecture", "deepseek");
  // llama.cpp sizes DeepSeek's shared experts as expert_feed_forward_length x
  // expert_shared_count and has no expert_shared_feed_forward_length key for it.
  d.erase_key("deepseek.expert_shared_feed_forward_length");
  d.set_u32("deepseek.leading_dense_block_count", 0);
  d.set_u32("deepseek.expert_shared_count", static_cast<uint32_t>(o.shared_count));
  d.set_f32("deepseek.expert_weights_scale", o.weights_scale);
  for (int il = 0; il < n_layer; ++il) {
    if (o.permute_qk) {
      for (const char* w : {"attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias"}) {
        if (d.has(blk(il, w))) permute_neox_to_norm(d.at(blk(il, w)), head_dim);
      }
    }
    if (d.has(blk(il, "ffn_gate_inp_shexp.weight"))) {  // absent in layers made dense
      d.erase(blk(il, "ffn_gate_inp_shexp.weight"));
      scale(d.at(blk(il, "ffn_down_shexp.weight")), 0.5f);
    }
    if (o.shared_count == 1 && d.has(blk(il, "ffn_gate_exps.weight"))) {
      const int64_t w = d.at(blk(il, "ffn_gate_shexp.weight")).shape[1];
      pad_experts(d.at(blk(il, "ffn_gate_exps.weight")), false, w);
      pad_experts(d.at(blk(il, "ffn_up_exps.weight")), false, w);
      pad_experts(d.at(blk(il, "ffn_down_exps.weight")), true, w);
    }
  }
  if (o.shared_count == 1)
    d.set_u32("deepseek.expert_feed_forward_length",
              static_cast<uint32_t>(d.at(blk(n_layer - 1, "ffn_gate_shexp.weight")).shape[1]));
  return d;
}

TEST(FamilyDeepseek, EqualsQwen2MoeWithZeroSharedGate) {
  const Draft qwen = qwen_zero_gate();
  auto a = build(qwen), b = build(to_deepseek(qwen, {}));
  const HParams& hp = b->model->hparams();
  ASSERT_EQ(hp.arch_name, "deepseek");
  EXPECT_EQ(hp.n_ff_exp, 64);
  EXPECT_EQ(hp.n_ff_shexp, 128);
  EXPECT_EQ(hp.n_layer_dense_lead, 0);
  expect_same_logits(*a->model, *b->model, qwen_prompts());
}

TEST(FamilyDeepseek, OneSharedExpertWithPaddedRoutedExperts) {
  const Draft qwen = qwen_zero_gate();
  auto a = build(qwen), b = build(to_deepseek(qwen, {.shared_count = 1}));
  EXPECT_EQ(b->model->hparams().n_ff_exp, 128);
  EXPECT_EQ(b->model->hparams().n_ff_shexp, 128);
  expect_same_logits(*a->model, *b->model, qwen_prompts());
}

// llama.cpp's deepseek graph passes scale_w = false to build_moe_ffn: the key is read but
// the top-k weights are not multiplied by it.
TEST(FamilyDeepseek, ExpertWeightsScaleIsNotApplied) {
  const Draft qwen = qwen_zero_gate();
  auto a = build(qwen), b = build(to_deepseek(qwen, {.weights_scale = 2.5f}));
  const auto prompt = qwen_prompts()[0];
  EXPECT_LE(worst_rel_diff(trace(*a->model, prompt, 0), trace(*b->model, prompt, 0)), kRelTol);
}

// Negative control: without the NEOX -> NORM permutation the logits differ clearly, so
// the comparisons above do see the RoPE type.
TEST(FamilyDeepseek, UnpermutedQkGivesDifferentLogits) {
  const Draft qwen = qwen_zero_gate();
  auto a = build(qwen), b = build(to_deepseek(qwen, {.permute_qk = false}));
  const auto prompt = qwen_prompts()[0];
  EXPECT_GT(worst_rel_diff(trace(*a->model, prompt, 0), trace(*b->model, prompt, 0)), 1e-3);
}

TEST(FamilyDeepseek, SharedExpertWidthAndTensorsAreChecked) {
  const Draft ds = to_deepseek(qwen_zero_gate(), {});
  Draft wrong_width = ds;  // 1 x 64 would be the shared width; the tensors are 128 wide
  wrong_width.set_u32("deepseek.expert_shared_count", 1);
  const std::string e1 = load_error(wrong_width);
  EXPECT_NE(e1.find("'blk.0.ffn_gate_shexp.weight'"), std::string::npos) << e1;

  Draft missing = ds;
  missing.erase(blk(1, "ffn_up_shexp.weight"));
  const std::string e2 = load_error(missing);
  EXPECT_NE(e2.find("'blk.1.ffn_up_shexp.weight'"), std::string::npos) << e2;
}

// ---------------------------------------------------------------------------------------
// 3. DeepSeek leading dense layer.

// Reference: the zero-gate Qwen2-MoE with layer 0's router zeroed (softmax = 1/8 each, so
// top-4 weights sum to 0.5) and every layer-0 expert a copy of expert 0 (E):
// layer 0 FFN = 0.5 E(x) + sigmoid(0) S(x) = 0.5 E(x) + 0.5 S(x).
Draft qwen_uniform_layer0() {
  Draft d = qwen_zero_gate();
  zero(d.at(blk(0, "ffn_gate_inp.weight")));
  for (const char* w : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
    copy_expert0_to_all(d.at(blk(0, w)));
  return d;
}

// Layer 0 as one dense SwiGLU over E's and S's hidden units together:
// gate = [E.gate; S.gate], up = [E.up; S.up], down = [0.5 E.down | 0.5 S.down].
Draft deepseek_dense_layer0(const Draft& qwen) {
  Draft d = qwen;
  Tensor eg = slice3(d.at(blk(0, "ffn_gate_exps.weight")), 0, "");
  Tensor eu = slice3(d.at(blk(0, "ffn_up_exps.weight")), 0, "");
  Tensor ed = slice3(d.at(blk(0, "ffn_down_exps.weight")), 0, "");
  Tensor sd = d.at(blk(0, "ffn_down_shexp.weight"));
  scale(ed, 0.5f);
  scale(sd, 0.5f);
  d.put(concat_rows(eg, d.at(blk(0, "ffn_gate_shexp.weight")), blk(0, "ffn_gate.weight")));
  d.put(concat_rows(eu, d.at(blk(0, "ffn_up_shexp.weight")), blk(0, "ffn_up.weight")));
  d.put(concat_cols(ed, sd, blk(0, "ffn_down.weight")));
  const auto n_ff = static_cast<uint32_t>(d.at(blk(0, "ffn_gate.weight")).shape[1]);
  for (const char* w : {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight",
                        "ffn_down_exps.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                        "ffn_down_shexp.weight", "ffn_gate_inp_shexp.weight"}) {
    d.erase(blk(0, w));
  }
  d = to_deepseek(std::move(d), {});
  d.set_u32("deepseek.leading_dense_block_count", 1);
  d.set_u32("deepseek.feed_forward_length", n_ff);
  return d;
}

TEST(FamilyDeepseekDenseLead, DenseLayerEqualsUniformMoeLayer) {
  const Draft qwen = qwen_uniform_layer0();
  auto a = build(qwen), b = build(deepseek_dense_layer0(qwen));
  const HParams& hp = b->model->hparams();
  EXPECT_EQ(hp.n_layer_dense_lead, 1);
  EXPECT_EQ(hp.n_ff, 64 + 128);
  EXPECT_FALSE(hp.layer_is_moe(0));
  EXPECT_TRUE(hp.layer_is_moe(1));
  const auto& layers = b->model->weights().layers;
  EXPECT_FALSE(layers[0].dense.empty());
  EXPECT_TRUE(layers[0].router.empty() && layers[0].shared_expert.empty());
  EXPECT_TRUE(layers[1].dense.empty());
  EXPECT_FALSE(layers[1].router.empty() || layers[1].shared_expert.empty());
  expect_same_logits(*a->model, *b->model, qwen_prompts());
}

// Layer 0 needs exactly the dense names, the later layers the MoE ones; a missing one is
// named in the error.
TEST(FamilyDeepseekDenseLead, TensorNamesPerLayerKind) {
  const Draft ds = deepseek_dense_layer0(qwen_uniform_layer0());
  for (const char* w : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) {
    Draft d = ds;
    d.erase(blk(0, w));
    const std::string e = load_error(d);
    EXPECT_NE(e.find("'" + blk(0, w) + "'"), std::string::npos) << e;
  }
  for (const char* w :
       {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight", "ffn_gate_shexp.weight"}) {
    Draft d = ds;
    d.erase(blk(1, w));
    const std::string e = load_error(d);
    EXPECT_NE(e.find("'" + blk(1, w) + "'"), std::string::npos) << e;
  }
  // With no leading dense layer, layer 0 must be MoE: its router is missing.
  Draft all_moe = ds;
  all_moe.set_u32("deepseek.leading_dense_block_count", 0);
  const std::string e1 = load_error(all_moe);
  EXPECT_NE(e1.find("'blk.0.ffn_gate_inp.weight'"), std::string::npos) << e1;
  // A dense layer needs feed_forward_length.
  Draft no_ff = ds;
  no_ff.erase_key("deepseek.feed_forward_length");
  const std::string e2 = load_error(no_ff);
  EXPECT_NE(e2.find("feed_forward_length"), std::string::npos) << e2;
}

// ---------------------------------------------------------------------------------------
// 4. Metadata defaults as llama.cpp reads them: files that leave a key out compute what the
//    same file with llama.cpp's default written in computes.

// A RoPE scaling factor without a type is linear scaling; older files name it scale_linear.
TEST(MetadataDefaults, RopeFactorWithoutTypeIsLinear) {
  const std::string src = test::shared_path("fixtures/mixtral/model.gguf");
  Draft typed(src), untyped(src), old_key(src);
  typed.set_str("llama.rope.scaling.type", "linear");
  typed.set_f32("llama.rope.scaling.factor", 4.0f);
  untyped.set_f32("llama.rope.scaling.factor", 4.0f);
  old_key.set_f32("llama.rope.scale_linear", 4.0f);
  auto a = build(typed), b = build(untyped), c = build(old_key), plain = build(Draft(src));
  EXPECT_FLOAT_EQ(b->model->hparams().rope.freq_scale, 0.25f);
  expect_same_logits(*a->model, *b->model, mixtral_prompts());
  expect_same_logits(*a->model, *c->model, mixtral_prompts());
  const std::vector<int32_t> prompt = mixtral_prompts()[2];
  EXPECT_GT(worst_rel_diff(trace(*plain->model, prompt, 0), trace(*b->model, prompt, 0)), 1e-3)
      << "the factor must change the logits";
  Draft none(src);  // "none" never scales, whatever the factor
  none.set_str("llama.rope.scaling.type", "none");
  none.set_f32("llama.rope.scaling.factor", 4.0f);
  EXPECT_FLOAT_EQ(build(none)->model->hparams().rope.freq_scale, 1.0f);
}

// Qwen files without the width keys: experts are feed_forward_length / top-k wide and
// Qwen2-MoE's shared expert feed_forward_length wide (older Qwen1.5-MoE conversions).
TEST(MetadataDefaults, QwenExpertWidthsWithoutTheirKeys) {
  const std::string src = test::shared_path("fixtures/qwen2moe/model.gguf");
  ASSERT_EQ(Draft(src).get_uint("qwen2moe.feed_forward_length"), 128u);
  ASSERT_EQ(Draft(src).get_uint("qwen2moe.expert_used_count"), 4u);
  Draft no_shared(src);  // shared width 128 = feed_forward_length
  no_shared.erase_key("qwen2moe.expert_shared_feed_forward_length");
  Draft no_expert(src);  // expert width 64 = 256 / 4
  no_expert.erase_key("qwen2moe.expert_feed_forward_length");
  no_expert.set_u32("qwen2moe.feed_forward_length", 256);
  auto ref = build(Draft(src)), a = build(no_shared), b = build(no_expert);
  EXPECT_EQ(a->model->hparams().n_ff_shexp, 128);
  EXPECT_EQ(b->model->hparams().n_ff_exp, 64);
  expect_same_logits(*ref->model, *a->model, qwen_prompts());
  expect_same_logits(*ref->model, *b->model, qwen_prompts());
}

// What the engine cannot run is refused by name instead of computing something else.
TEST(MetadataDefaults, UnsupportedRopeFactorsAndExpertCountsAreRefused) {
  Draft d(test::shared_path("fixtures/mixtral/model.gguf"));
  d.put(Tensor{"rope_freqs.weight", {4}, {1, 2, 8, 32}});
  EXPECT_NE(load_error(d).find("'rope_freqs.weight'"), std::string::npos) << load_error(d);
  Draft many(test::shared_path("fixtures/mixtral/model.gguf"));
  many.set_u32("llama.expert_count", 5000);
  const std::string e = load_error(many);
  EXPECT_NE(e.find("expert_count 5000 is above the 4096"), std::string::npos) << e;
}

}  // namespace
}  // namespace sy
