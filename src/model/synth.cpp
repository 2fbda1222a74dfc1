#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "base/mix64.h"
#include "base/thread_pool.h"
#include "formats/gguf_writer.h"
#include "kernels/cpu/quantize.h"
#include "model/synth_vocab.h"

namespace sy {
namespace {

constexpr double kSharedFraction = 0.25;  // energy of the embeddings along the shared direction u
// Near the top-k cut-off of Gaussian router logits, the log of an expert's selection
// probability grows by about this much per std of logit boost (the Gaussian hazard at the
// 1 - k/n quantile: ~1.6 for top-8 of 64).
constexpr double kTailSlope = 1.6;
constexpr int64_t kMaxDim = int64_t{1} << 30;

// ---- deterministic counter-based random numbers --------------------------------------

// Approximately N(0, 1): the sum of four 16-bit uniforms from one hash of (key, i), centred
// and scaled (Irwin-Hall, n = 4). Integer arithmetic only, so the same on every machine.
inline float gauss(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key + i * 0x9e3779b97f4a7c15ULL);
  const int64_t s =
      static_cast<int64_t>((h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48));
  constexpr float kScale = 2.6429e-5f;  // 1 / sqrt(4 * (65536^2 - 1) / 12)
  return static_cast<float>(s - 131070) * kScale;
}

uint64_t key_of(uint64_t seed, const std::string& what) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : what) h = (h ^ c) * 0x100000001b3ULL;
  return mix64(mix64(seed + 0x632be59bd9b4e019ULL) ^ h);
}

// ---- presets and validation -------------------------------------------------------------

SynthShape shape(const char* arch, int64_t vocab, int64_t ctx, int64_t embd, int layers, int heads,
                 int heads_kv, int head_dim, int experts, int used, int64_t ff, int64_t ff_shexp, float eps,
                 float rope) {
  return SynthShape{arch,     vocab,   ctx,  embd, layers,   heads, heads_kv,
                    head_dim, experts, used, ff,   ff_shexp, eps,   rope};
}

bool is_quantized(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0;
}

// general.file_type (llama_ftype): F32, F16 and Q4_0 share their tensor type numbers.
uint32_t file_type(DType t) {
  if (t == DType::Q8_0) return 7;
  if (t == DType::BF16) return 32;
  return static_cast<uint32_t>(t);
}

// ---- the tensors ---------------------------------------------------------------------------

// Reader: normal rows made orthogonal to the shared direction u (so no layer but the
// routers sees it and it passes through the residual stream unchanged), plus, for the
// router of layer `layer`, each expert's component along u.
enum class Init { Ones, Normal, Embedding, Reader };

struct Planned {
  SynthTensor t;
  Init init = Init::Normal;
  float stddev = 0.0f;
  int layer = -1;
};

std::vector<Planned> plan(const SynthOptions& o) {
  const SynthShape& s = o.shape;
  const DType T = o.type;
  const int64_t d = s.n_embd;
  const bool moe = s.n_expert > 0;
  const float rd = static_cast<float>(1.0 / std::sqrt(double(d)));  // readers: rows of n_embd
  // Writers add to the residual: scaled down by depth so it grows to at most ~sqrt(2) x.
  auto writer = [&](int64_t fan_in) {
    return static_cast<float>(1.0 / std::sqrt(double(fan_in) * 2 * s.n_layer));
  };
  std::vector<Planned> p;
  auto add = [&](std::string name, DType type, std::vector<int64_t> shape, Init init, float sd = 0,
                 int layer = -1) {
    p.push_back({{std::move(name), type, std::move(shape)}, init, sd, layer});
  };
  add("token_embd.weight", T, {d, s.n_vocab}, Init::Embedding);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(b + "attn_norm.weight", DType::F32, {d}, Init::Ones);
    add(b + "attn_q.weight", T, {d, s.q_dim()}, Init::Reader, rd);
    add(b + "attn_k.weight", T, {d, s.kv_dim()}, Init::Reader, rd);
    add(b + "attn_v.weight", T, {d, s.kv_dim()}, Init::Reader, rd);
    if (s.arch == "qwen2moe") {
      add(b + "attn_q.bias", DType::F32, {s.q_dim()}, Init::Normal, 0.02f);
      add(b + "attn_k.bias", DType::F32, {s.kv_dim()}, Init::Normal, 0.02f);
      add(b + "attn_v.bias", DType::F32, {s.kv_dim()}, Init::Normal, 0.02f);
    }
    add(b + "attn_output.weight", T, {s.q_dim(), d}, Init::Normal, writer(s.q_dim()));
    if (s.arch == "olmoe") {  // RMSNorm over all heads together
      add(b + "attn_q_norm.weight", DType::F32, {s.q_dim()}, Init::Ones);
      add(b + "attn_k_norm.weight", DType::F32, {s.kv_dim()}, Init::Ones);
    } else if (s.arch == "qwen3moe") {  // per head
      add(b + "attn_q_norm.weight", DType::F32, {s.head_size()}, Init::Ones);
      add(b + "attn_k_norm.weight", DType::F32, {s.head_size()}, Init::Ones);
    }
    add(b + "ffn_norm.weight", DType::F32, {d}, Init::Ones);
    if (moe) {
      add(b + "ffn_gate_inp.weight", DType::F32, {d, s.n_expert}, Init::Reader, rd, il);
      add(b + "ffn_gate_exps.weight", T, {d, s.n_ff, s.n_expert}, Init::Reader, rd);
      add(b + "ffn_up_exps.weight", T, {d, s.n_ff, s.n_expert}, Init::Reader, rd);
      add(b + "ffn_down_exps.weight", T, {s.n_ff, d, s.n_expert}, Init::Normal, writer(s.n_ff));
      if (s.arch == "qwen2moe") {
        add(b + "ffn_gate_inp_shexp.weight", DType::F32, {d}, Init::Reader, rd);
        add(b + "ffn_gate_shexp.weight", T, {d, s.n_ff_shexp}, Init::Reader, rd);
        add(b + "ffn_up_shexp.weight", T, {d, s.n_ff_shexp}, Init::Reader, rd);
        add(b + "ffn_down_shexp.weight", T, {s.n_ff_shexp, d}, Init::Normal, writer(s.n_ff_shexp));
      }
    } else {
      add(b + "ffn_gate.weight", T, {d, s.n_ff}, Init::Reader, rd);
      add(b + "ffn_up.weight", T, {d, s.n_ff}, Init::Reader, rd);
      add(b + "ffn_down.weight", T, {s.n_ff, d}, Init::Normal, writer(s.n_ff));
    }
  }
  add("output_norm.weight", DType::F32, {d}, Init::Ones);
  add("output.weight", T, {d, s.n_vocab}, Init::Reader, rd);
  return p;
}

// What the row generator needs besides the tensor: the shared direction and, per layer,
// each expert's router component along it.
struct Generator {
  uint64_t seed = 0;
  std::vector<float> u;                   // unit vector, n_embd
  std::vector<std::vector<float>> along;  // [layer][expert]
  ThreadPool* pool = nullptr;
};

void fill_row(const Generator& g, const Planned& p, uint64_t key, int64_t row, float* x, int64_t n) {
  const uint64_t base = static_cast<uint64_t>(row) * static_cast<uint64_t>(n);
  switch (p.init) {
    case Init::Ones:
      std::fill(x, x + n, 1.0f);
      return;
    case Init::Normal:
      for (int64_t j = 0; j < n; ++j) x[j] = p.stddev * gauss(key, base + j);
      return;
    case Init::Embedding: {
      // Rows of RMS ~1: a token-specific part plus the shared component along u.
      const float a = static_cast<float>(std::sqrt(1.0 - kSharedFraction));
      const float c = static_cast<float>(std::sqrt(kSharedFraction * double(n)));
      for (int64_t j = 0; j < n; ++j) x[j] = a * gauss(key, base + j) + c * g.u[j];
      return;
    }
    case Init::Reader: {
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) {
        x[j] = p.stddev * gauss(key, base + j);
        dot += double(x[j]) * g.u[j];
      }
      const float along = p.layer >= 0 ? g.along[p.layer][row] : 0.0f;
      const float shift = along - static_cast<float>(dot);
      for (int64_t j = 0; j < n; ++j) x[j] += shift * g.u[j];
      return;
    }
  }
}

GgufWriter::RowSource row_source(std::shared_ptr<const Generator> g, const Planned& p) {
  const uint64_t key = key_of(g->seed, p.t.name);
  return [g = std::move(g), p, key](int64_t first, int64_t last, uint8_t* dst) {
    const int64_t n = p.t.shape[0];
    const size_t row_bytes = dtype_row_bytes(p.t.type, n);
    const int64_t rows = last - first;
    const int64_t n_tasks = std::min<int64_t>(rows, int64_t{g->pool->size()} * 4);
    g->pool->parallel_for(n_tasks, [&](int64_t task, int) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t r = first + rows * task / n_tasks; r < first + rows * (task + 1) / n_tasks; ++r) {
        fill_row(*g, p, key, r, x.data(), n);
        cpu::quantize_row(p.t.type, x.data(), dst + static_cast<size_t>(r - first) * row_bytes, n);
      }
    });
  };
}

std::shared_ptr<Generator> make_generator(const SynthOptions& o, ThreadPool& pool) {
  auto g = std::make_shared<Generator>();
  const int64_t d = o.shape.n_embd;
  g->seed = o.seed;
  g->pool = &pool;
  g->u.resize(static_cast<size_t>(d));
  const uint64_t ukey = key_of(o.seed, "shared direction");
  double norm = 0;
  for (int64_t j = 0; j < d; ++j) {
    g->u[j] = gauss(ukey, j);
    norm += double(g->u[j]) * g->u[j];
  }
  for (float& v : g->u) v = static_cast<float>(v / std::sqrt(norm));
  // The expert of rank j gets a logit boost of skew * ln(n / (j + 1)) / kTailSlope std, so
  // that selection frequency falls off roughly as 1 / (j + 1)^skew (a Zipf law, the long
  // tail of expert popularity that trained MoE models show):
  // along * <u, x_norm> = boost * sqrt(1 - f), with <u, x_norm> ~ sqrt(f * n_embd).
  const double per_boost = std::sqrt((1.0 - kSharedFraction) / (kSharedFraction * double(d)));
  for (int il = 0; il < o.shape.n_layer; ++il) {
    std::vector<float> along(static_cast<size_t>(std::max(0, o.shape.n_expert)), 0.0f);
    if (o.router_skew > 0) {
      const std::vector<int> order = synth_hot_order(o, il);
      for (size_t rank = 0; rank < order.size(); ++rank) {
        const double boost = o.router_skew * std::log(double(order.size()) / double(rank + 1)) / kTailSlope;
        along[order[rank]] = static_cast<float>(boost * per_boost);
      }
    }
    g->along.push_back(std::move(along));
  }
  return g;
}

// ---- metadata and vocabulary ---------------------------------------------------------------

void add_hparams(GgufWriter& w, const SynthOptions& o) {
  const SynthShape& s = o.shape;
  const std::string a = s.arch + ".";
  w.add_string("general.architecture", s.arch);
  w.add_string("general.name", o.name.empty() ? "synth-" + s.arch : o.name);
  char desc[160];
  std::snprintf(desc, sizeof desc, "random weights from switchyard synth (seed %llu, router skew %g)",
                static_cast<unsigned long long>(o.seed), o.router_skew);
  w.add_string("general.description", desc);
  w.set_alignment(32);
  w.add_uint32("general.file_type", file_type(o.type));
  if (is_quantized(o.type)) w.add_uint32("general.quantization_version", 2);
  auto u32 = [&](const std::string& key, int64_t v) { w.add_uint32(a + key, static_cast<uint32_t>(v)); };
  u32("context_length", s.n_ctx);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  // qwen2moe's feed_forward_length is the dense width its shared expert has; the others
  // read the expert width from it.
  u32("feed_forward_length", s.arch == "qwen2moe" ? s.n_ff_shexp : s.n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  if (s.head_size() * s.n_head != s.n_embd) {
    u32("attention.key_length", s.head_size());
    u32("attention.value_length", s.head_size());
  }
  w.add_float32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.add_float32(a + "rope.freq_base", s.rope_base);
  u32("rope.dimension_count", s.head_size());
  if (s.n_expert > 0) {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
    u32("expert_feed_forward_length", s.n_ff);
    if (s.arch == "qwen2moe") u32("expert_shared_feed_forward_length", s.n_ff_shexp);
  }
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> presets = {
      {"olmoe-1b-7b", "OLMoE-1B-7B: 2048 wide, 16 layers, 64 experts top-8, expert FFN 1024, vocab 50304",
       shape("olmoe", 50304, 4096, 2048, 16, 16, 16, 0, 64, 8, 1024, 0, 1e-5f, 10000.0f)},
      {"qwen-moe-a2.7b",
       "Qwen1.5-MoE-A2.7B: 2048 wide, 24 layers, 60 experts top-4 (FFN 1408) + shared expert (FFN 5632), "
       "vocab 151936",
       shape("qwen2moe", 151936, 8192, 2048, 24, 16, 16, 0, 60, 4, 1408, 5632, 1e-6f, 1000000.0f)},
      {"qwen3-30b-a3b",
       "Qwen3-30B-A3B: 2048 wide, 48 layers, 32/4 heads of 128, 128 experts top-8, expert FFN 768, vocab "
       "151936",
       shape("qwen3moe", 151936, 40960, 2048, 48, 32, 4, 128, 128, 8, 768, 0, 1e-6f, 1000000.0f)},
      {"mixtral-8x7b",
       "Mixtral-8x7B: 4096 wide, 32 layers, 32/8 heads, 8 experts top-2, expert FFN 14336, vocab 32000",
       shape("llama", 32000, 32768, 4096, 32, 32, 8, 0, 8, 2, 14336, 0, 1e-5f, 1000000.0f)},
      {"tiny",
       "for tests: olmoe, 64 wide, 2 layers, 4 heads, 8 experts top-2, expert FFN 64, vocab 512",
       shape("olmoe", 512, 256, 64, 2, 4, 4, 0, 8, 2, 64, 0, 1e-5f, 10000.0f)},
  };
  return presets;
}

const SynthPreset& synth_preset(const std::string& name) {
  std::string names;
  for (const SynthPreset& p : synth_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw Error("--preset: unknown preset '" + name + "' (available: " + names + ")");
}

void validate_synth(const SynthOptions& o) {
  const SynthShape& s = o.shape;
  auto fail = [](const std::string& m) { throw Error(m); };
  auto str = [](int64_t v) { return std::to_string(v); };
  if (s.arch != "llama" && s.arch != "olmoe" && s.arch != "qwen2moe" && s.arch != "qwen3moe") {
    fail("--arch: '" + s.arch + "' is not one synth can write (supported: llama, olmoe, qwen2moe, qwen3moe)");
  }
  auto positive = [&](int64_t v, const char* flag) {
    if (v <= 0 || v > kMaxDim)
      fail(std::string(flag) + " must be in 1.." + str(kMaxDim) + " (got " + str(v) + ")");
  };
  positive(s.n_embd, "--embd");
  positive(s.n_layer, "--layers");
  positive(s.n_head, "--heads");
  positive(s.n_head_kv, "--heads-kv");
  positive(s.n_ctx, "--ctx");
  positive(s.n_ff, "--ff");
  positive(s.n_vocab, "--vocab");
  if (s.n_head % s.n_head_kv != 0)
    fail("--heads-kv " + str(s.n_head_kv) + " must divide --heads " + str(s.n_head));
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0)
    fail("--embd " + str(s.n_embd) + " must be a multiple of --heads " + str(s.n_head));
  if (s.head_size() % 2 != 0 || s.head_size() > 512) {
    fail("the head dimension (--embd / --heads = " + str(s.head_size()) +
         ") must be even and at most 512 (RoPE)");
  }
  if ((s.arch == "olmoe" || s.arch == "qwen2moe") && s.q_dim() != s.n_embd) {
    fail(s.arch + " needs heads * head dimension = --embd");
  }
  if (s.arch == "olmoe" && s.n_head_kv != s.n_head) {
    fail("--heads-kv: olmoe needs as many KV heads as heads (its K norm spans the full width), got " +
         str(s.n_head_kv) + " for " + str(s.n_head));
  }
  if (s.n_expert < 0 || (s.n_expert == 0 && s.arch != "llama"))
    fail("--experts must be at least 1 for " + s.arch);
  if (s.n_expert > 0 && (s.n_expert_used < 1 || s.n_expert_used > s.n_expert)) {
    fail("--experts-used " + str(s.n_expert_used) + " must be in 1..--experts (" + str(s.n_expert) + ")");
  }
  if (s.arch == "qwen2moe") positive(s.n_ff_shexp, "--ff-shared (qwen2moe's shared expert)");
  if (o.vocab_file.empty() && s.n_vocab < 257) {
    fail("--vocab " + str(s.n_vocab) +
         " is too small for a synthesized vocabulary (at least 257: 256 byte tokens and <|endoftext|>)");
  }
  if (!std::isfinite(o.router_skew) || o.router_skew < 0) fail("--router-skew must be a number >= 0");
  if (is_quantized(o.type)) {
    const std::string t = dtype_name(o.type);
    auto block = [&](int64_t v, const std::string& what) {
      if (v % kQBlock != 0)
        fail(what + " " + str(v) + " is not a multiple of 32, which --type " + t +
             " needs (blocks of 32 values)");
    };
    block(s.n_embd, "--embd");
    block(s.q_dim(), "heads * head dimension");
    block(s.n_ff, "--ff");
    if (s.arch == "qwen2moe") block(s.n_ff_shexp, "--ff-shared");
  }
}

std::vector<SynthTensor> synth_tensors(const SynthOptions& o) {
  validate_synth(o);
  std::vector<SynthTensor> out;
  for (Planned& p : plan(o)) out.push_back(std::move(p.t));
  return out;
}

std::vector<int> synth_hot_order(const SynthOptions& o, int layer) {
  std::vector<int> order(static_cast<size_t>(std::max(0, o.shape.n_expert)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const uint64_t key = key_of(o.seed, "hot experts " + std::to_string(layer));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[mix64(key + i) % i]);
  return order;
}

SynthStats write_synth_model(const std::string& path, const SynthOptions& o, ThreadPool& pool,
                             const std::function<void(uint64_t, uint64_t)>& progress) {
  validate_synth(o);
  GgufWriter w;
  add_hparams(w, o);
  if (o.vocab_file.empty()) {
    add_synth_vocab(w, o.shape.n_vocab);
  } else {
    add_file_vocab(w, o.vocab_file, o.shape.n_vocab);
  }
  std::shared_ptr<const Generator> g = make_generator(o, pool);
  SynthStats stats;
  for (const Planned& p : plan(o)) {
    int64_t n = 1;
    for (int64_t dim : p.t.shape) n *= dim;
    stats.n_params += n;
    ++stats.n_tensors;
    w.add_tensor_rows(p.t.name, p.t.type, p.t.shape, row_source(g, p));
  }
  stats.file_bytes = w.file_size();

  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
  const std::filesystem::space_info space = std::filesystem::space(parent, ec);
  if (!ec && space.available < stats.file_bytes) {
    throw Error("not enough disk space for " + path + ": the model needs " +
                std::to_string(stats.file_bytes / 1000000) + " MB, " +
                std::to_string(space.available / 1000000) + " MB are free");
  }
  try {
    w.write(path, progress);
  } catch (...) {
    std::filesystem::remove(path, ec);
    throw;
  }
  return stats;
}

}  // namespace sy
