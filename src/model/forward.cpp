#include "model/forward.h"

#include <cmath>
#include <cstring>

#include "base/clock.h"
#include "base/error.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/weight_prep.h"

namespace sy {
namespace {

void add_bias(float* rows, int64_t n, int64_t dim, const std::vector<float>& bias) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < dim; ++i) rows[t * dim + i] += bias[i];
}

}  // namespace

RouterRules router_rules(const HParams& hp) {
  RouterRules r;
  r.n_expert = hp.n_expert;
  r.k = hp.n_expert_used;
  r.renormalize = hp.rules->renormalize_topk;
  r.scale = hp.rules->scale_expert_weights ? hp.expert_weights_scale : 1.0f;
  return r;
}

Forward::Forward(const Model& model, ThreadPool& pool, MoeOptions moe)
    : model_(model), hp_(model.hparams()), pool_(pool), backend_(pool), moe_opt_(moe), router_rules_(router_rules(hp_)) {
  moe_stats_.resize(hp_.n_layer);
}

KvCache Forward::make_cache(int64_t n_ctx, int n_seq) const {
  return KvCache::contiguous(hp_.n_layer, hp_.k_dim(), hp_.v_dim(), n_ctx, n_seq, model_.kv_type());
}

void Forward::add_pending_and_norm(const std::vector<float>& weight, int64_t n) {
  const int64_t d = hp_.n_embd;
  const float* delta = pending_;
  pending_ = nullptr;
  // axpy with 1: fma(1, a, b) rounds a + b, the same sum as the add it replaces.
  const auto axpy = cpu::dot_kernels().axpy;
  pool_.parallel_for(n, [&](int64_t t, int) {
    float* x = x_.data() + t * d;
    if (delta) axpy(1.0f, delta + t * d, x, d);
    cpu::rms_norm(x, weight.data(), d, hp_.rms_eps, h_.data() + t * d);
  });
}

void Forward::add_pending(int64_t n) {
  if (pending_) cpu::dot_kernels().axpy(1.0f, pending_, x_.data(), n * hp_.n_embd);
  pending_ = nullptr;
}

int64_t Forward::attention_block(int il, const Batch& b, KvCache& cache, bool logit_rows_only) {
  const LayerWeights& L = model_.weights().layers[il];
  const int64_t d = hp_.n_embd;
  int64_t n = b.size();
  const int64_t qd = hp_.q_dim(), kd = hp_.k_dim(), vd = hp_.v_dim();
  const int64_t od = int64_t{hp_.n_head} * hp_.head_dim_v;

  add_pending_and_norm(L.attn_norm, n);
  qkv_[0] = {&L.wq, {q_.data(), qd}};
  qkv_[1] = {&L.wk, {k_.data(), kd}};
  qkv_[2] = {&L.wv, {v_.data(), vd}};
  backend_.matmul_same_input(qkv_, {h_.data(), n, d});
  add_bias(q_.data(), n, qd, L.bq);
  add_bias(k_.data(), n, kd, L.bk);
  add_bias(v_.data(), n, vd, L.bv);

  // Per token: q/k norms, RoPE, the cache write (token by token across the threads; at
  // 32 sequences this was 8 ms of a step on one thread).
  pool_.parallel_for(n, [&](int64_t t, int) {
    float* q = &q_[t * qd];
    float* k = &k_[t * kd];
    if (hp_.rules->qk_norm == QkNorm::FullWidth) {
      cpu::rms_norm(q, L.q_norm.data(), qd, hp_.rms_eps, q);
      cpu::rms_norm(k, L.k_norm.data(), kd, hp_.rms_eps, k);
    } else if (hp_.rules->qk_norm == QkNorm::PerHead) {
      for (int h = 0; h < hp_.n_head; ++h) cpu::rms_norm(q + h * hp_.head_dim_k, L.q_norm.data(), hp_.head_dim_k, hp_.rms_eps, q + h * hp_.head_dim_k);
      for (int h = 0; h < hp_.n_head_kv; ++h) cpu::rms_norm(k + h * hp_.head_dim_k, L.k_norm.data(), hp_.head_dim_k, hp_.rms_eps, k + h * hp_.head_dim_k);
    }
    const float* angles = rope_angles_.data() + t * hp_.rope.n_rot;
    cpu::rope_rotate(q, hp_.n_head, hp_.head_dim_k, angles, hp_.rope);
    cpu::rope_rotate(k, hp_.n_head_kv, hp_.head_dim_k, angles, hp_.rope);
    cache.store(il, b.seq[t], b.positions[t], k, &v_[t * vd]);
  });

  const int32_t* seq = b.seq.data();
  const int32_t* pos = b.positions.data();
  if (logit_rows_only) {
    n = keep_logit_rows(b, qd);
    if (n == 0) return 0;  // a prompt chunk without its last token: only the K/V writes count
    seq = kept_seq_.data();
    pos = kept_pos_.data();
  }

  // One attention job over every run of consecutive tokens of one sequence.
  const cpu::AttentionShape shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v,
                                  1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k))};
  const double core0 = now_seconds();
  attn_runs_.clear();
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && seq[t1] == seq[t0]) ++t1;
    attn_runs_.push_back({t0, t1 - t0, {}});
    t0 = t1;
  }
  if (kv_blocks_.size() < attn_runs_.size()) kv_blocks_.resize(attn_runs_.size());
  for (size_t r = 0; r < attn_runs_.size(); ++r) attn_runs_[r].kv = cache.view(il, seq[attn_runs_[r].t0], kv_blocks_[r]);
  backend_.attention(q_.data(), qd, pos, attn_runs_, shape, attn_.data(), od);
  profile_.attention_core += now_seconds() - core0;

  backend_.matmul(L.wo, {attn_.data(), n, od}, {proj_.data(), d});
  add_bias(proj_.data(), n, d, L.bo);
  pending_ = proj_.data();
  return n;
}

int64_t Forward::keep_logit_rows(const Batch& b, int64_t qd) {
  const int64_t d = hp_.n_embd;
  kept_seq_.clear();
  kept_pos_.clear();
  for (int64_t t = 0; t < b.size(); ++t) {
    if (!b.want_logits[t]) continue;
    const auto m = static_cast<int64_t>(kept_seq_.size());
    if (m != t) {
      std::memcpy(&q_[m * qd], &q_[t * qd], sizeof(float) * qd);
      std::memcpy(&x_[m * d], &x_[t * d], sizeof(float) * d);
    }
    kept_seq_.push_back(b.seq[t]);
    kept_pos_.push_back(b.positions[t]);
  }
  return static_cast<int64_t>(kept_seq_.size());
}

// The first MoE layers have no earlier layer to guess their experts from: their routers
// go over the token embeddings instead (the residual stream before any layer has added
// to it), each normed as its layer's FFN input will be, so their loads start with the
// step rather than when the step reaches them.
void Forward::prefetch_first_layers(int64_t n) {
  // Under expert parallelism a rank's layers prefetch nothing (MoeLayer::forward): neither here.
  if (moe_opt_.expert_parallel()) return;
  const int64_t d = hp_.n_embd;
  // The first `prefetch_layers` MoE layers: a dense layer before them (DeepSeek's lead
  // layers) hints nothing to the layer after it.
  for (int il = 0, left = model_.prefetch_layers(); il < hp_.n_layer && left > 0; ++il) {
    if (!hp_.layer_is_moe(il)) continue;
    --left;
    const LayerWeights& L = model_.weights().layers[il];
    pool_.parallel_for(n, [&](int64_t t, int) {
      cpu::rms_norm(x_.data() + t * d, L.ffn_norm.data(), d, hp_.rms_eps, h_.data() + t * d);
    });
    moe_.prefetch(h_.data(), n, d, {&L.router, il}, router_rules_, model_.experts(), backend_);
  }
}

void Forward::ffn_block(int il, int64_t n) {
  const LayerWeights& L = model_.weights().layers[il];
  const int64_t d = hp_.n_embd;
  add_pending_and_norm(L.ffn_norm, n);

  const double t0 = now_seconds();
  if (!hp_.layer_is_moe(il)) {
    ffn_job_.assign(1, {&L.dense, 0, n});
    backend_.ffn(ffn_job_, {h_.data(), n, d}, {ffn_out_.data(), d});
    pending_ = ffn_out_.data();
    profile_.ffn += now_seconds() - t0;
    return;
  }
  next_.clear();
  for (int ahead = 1; ahead <= model_.prefetch_layers() && il + ahead < hp_.n_layer; ++ahead) {
    if (hp_.layer_is_moe(il + ahead)) next_.push_back({&model_.weights().layers[il + ahead].router, il + ahead});
  }
  moe_stats_[il] = moe_.forward(h_.data(), n, d, L.router, router_rules_, model_.experts(), il,
                                moe_opt_, ffn_out_.data(), d, backend_, pool_, next_);
  const double t1 = now_seconds();
  profile_.moe += t1 - t0;
  if (!L.shared_expert.empty()) {
    ffn_job_.assign(1, {&L.shared_expert, 0, n});
    backend_.ffn(ffn_job_, {h_.data(), n, d}, {shared_out_.data(), d});
    for (int64_t t = 0; t < n; ++t) {
      float g = 1.0f;
      if (!L.shared_gate.empty()) {
        // sigmoid(gate . h): Qwen-MoE scales the shared expert per token.
        float s = 0.0f;
        for (int64_t i = 0; i < d; ++i) s += L.shared_gate[i] * h_[t * d + i];
        g = 1.0f / (1.0f + std::exp(-s));
      }
      for (int64_t i = 0; i < d; ++i) ffn_out_[t * d + i] += shared_out_[t * d + i] * g;
    }
    profile_.ffn += now_seconds() - t1;
  }
  pending_ = ffn_out_.data();
}

void Forward::run(const Batch& b, KvCache& cache, std::vector<float>& logits) {
  const int64_t n = b.size(), d = hp_.n_embd;
  if (n == 0) return;
  for (int64_t t = 0; t < n; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= hp_.n_vocab) {
      throw Error("token id " + std::to_string(b.tokens[t]) + " is out of range (vocabulary has " +
                  std::to_string(hp_.n_vocab) + " tokens)");
    }
    if (b.seq[t] < 0 || b.seq[t] >= cache.n_seq()) throw Error("sequence id out of range");
    if (b.positions[t] < 0 || !cache.reserve(b.seq[t], b.positions[t] + 1)) {
      throw Error("position " + std::to_string(b.positions[t]) + " does not fit the KV cache (context " +
                  std::to_string(cache.max_positions()) + " tokens, " + std::to_string(cache.free_blocks()) +
                  " free blocks); use a larger --ctx-size or a shorter input");
    }
  }
  auto grow = [](std::vector<float>& v, int64_t size) { if (v.size() < static_cast<size_t>(size)) v.resize(size); };
  grow(x_, n * d); grow(h_, n * d); grow(proj_, n * d); grow(ffn_out_, n * d); grow(shared_out_, n * d);
  grow(q_, n * hp_.q_dim()); grow(k_, n * hp_.k_dim()); grow(v_, n * hp_.v_dim());
  grow(attn_, n * hp_.n_head * hp_.head_dim_v);
  grow(rope_angles_, n * hp_.rope.n_rot);
  // Each token's rotation angles, once for all layers (computed for q and again for k in
  // every layer, they were ~1 us of the 2.7 us of a layer's RoPE at one token).
  pool_.parallel_for(n, [&](int64_t t, int) { cpu::rope_angles(b.positions[t], hp_.rope, rope_angles_.data() + t * hp_.rope.n_rot); });

  model_.experts().begin_step();
  const WeightMatrix& emb = model_.weights().token_embd;
  for (int64_t t = 0; t < n; ++t) cpu::weight_row_to_f32(emb, b.tokens[t], &x_[t * d]);
  prefetch_first_layers(n);

  // Past the last layer's K/V writes, only the rows that want logits feed anything: the
  // last layer's attention output and FFN skip the others (as llama.cpp does), unless an
  // observer needs every layer to route every token. Expert-parallel ranks meet in every
  // MoE layer, so there a rank keeps at least one row.
  int64_t n_want = 0;
  for (uint8_t w : b.want_logits) n_want += w;
  const bool prune = n_want < n && !(moe_opt_.observer && moe_opt_.observer->needs_every_token()) &&
                     (n_want > 0 || moe_opt_.comm == nullptr);

  int64_t rows = n;
  pending_ = nullptr;  // nothing left over from a step that threw
  for (int il = 0; il < hp_.n_layer; ++il) {
    const double t0 = now_seconds();
    rows = attention_block(il, b, cache, prune && il == hp_.n_layer - 1);
    const double t1 = now_seconds();
    if (rows > 0) ffn_block(il, rows);
    else moe_stats_[il] = {};  // nothing routed: no stale figures from the previous step
    profile_.attention += t1 - t0;
  }
  add_pending(rows);
  const double t_out = now_seconds();

  // Final norm and the output head only for the rows that want logits (already the first
  // n_want rows when the last layer pruned the others).
  int64_t n_out = 0;
  for (int64_t t = 0; t < rows; ++t) {
    if (prune || b.want_logits[t]) cpu::rms_norm(&x_[t * d], model_.weights().output_norm.data(), d, hp_.rms_eps, &h_[n_out++ * d]);
  }
  logits.resize(static_cast<size_t>(n_out * hp_.n_vocab));
  backend_.matmul(model_.weights().output, {h_.data(), n_out, d}, {logits.data(), hp_.n_vocab});
  profile_.output += now_seconds() - t_out;
  profile_.steps++;
  if (moe_opt_.observer) moe_opt_.observer->on_step_end();
}

}  // namespace sy
