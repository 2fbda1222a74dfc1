// One forward step of the transformer over a Batch: embeddings, attention with the KV
// cache, dense or MoE feed-forward per layer, and logits for the tokens that want them.
// Holds the step's scratch buffers, so one Forward serves one thread of control.
#pragma once

#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul.h"
#include "model/batch.h"
#include "model/model.h"
#include "moe/moe_layer.h"
#include "runtime/kv_cache.h"

namespace sy {

// Wall time of each part of the forward steps so far (for `bench`: where time goes).
struct StepProfile {
  double attention = 0;  // norms, Q/K/V/O projections, RoPE, attention
  double attention_core = 0;  // of which softmax(QK^T)V over the KV cache
  double moe = 0;        // routers, dispatch and routed experts
  double ffn = 0;        // dense FFNs and shared experts
  double output = 0;     // final norm and output head
  int64_t steps = 0;
};

// The router rules of a model family with these hyperparameters.
RouterRules router_rules(const HParams& hp);

class Forward {
 public:
  Forward(const Model& model, ThreadPool& pool, MoeOptions moe = {});

  // Appends the batch's K/V to `cache` and writes one row of n_vocab logits per token
  // with want_logits set, in batch order. Throws sy::Error for out-of-range token ids or
  // positions beyond the cache.
  void run(const Batch& batch, KvCache& cache, std::vector<float>& logits);

  KvCache make_cache(int64_t n_ctx, int n_seq = 1) const;
  // Per MoE layer, what the last step did (empty entries for dense layers).
  const std::vector<MoeStepStats>& moe_stats() const { return moe_stats_; }
  const MoeLayer& moe_layer() const { return moe_; }
  const StepProfile& profile() const { return profile_; }
  void reset_profile() { profile_ = {}; }
  // Routing decisions of every later step go to `observer` (null: none).
  void set_routing_observer(RoutingObserver* observer) { moe_opt_.observer = observer; }

 private:
  // For the first n rows of x_: adds the pending block output (the residual), then h_ =
  // rms_norm(x_) * weight; a row per task. The add used to run alone on one thread
  // between the jobs, a serial pass over x_ before every norm.
  void add_pending_and_norm(const std::vector<float>& weight, int64_t n);
  // Adds the pending block output to the first n rows of x_ (after the last layer).
  void add_pending(int64_t n);
  // Norms, projections, the cache write and attention of layer il; leaves the attention
  // output pending for x_ (added by the FFN's norm). With logit_rows_only, the rows that
  // want no logits stop after their K/V write and the others are compacted to the front of
  // q_ and x_. Returns the rows kept.
  int64_t attention_block(int il, const Batch& b, KvCache& cache, bool logit_rows_only);
  int64_t keep_logit_rows(const Batch& b, int64_t qd);
  void prefetch_first_layers(int64_t n);
  void ffn_block(int il, int64_t n);

  const Model& model_;
  const HParams& hp_;
  ThreadPool& pool_;
  CpuBackend backend_;  // the device the layers' kernels run on
  MoeOptions moe_opt_;
  RouterRules router_rules_;

  std::vector<float> x_, h_, q_, k_, v_, attn_, proj_, ffn_out_, shared_out_, shared_gate_;
  std::vector<float> rope_angles_;  // per token: cpu::rope_angles
  // A block's output (rows of n_embd) that x_ has not received yet: the next norm adds it.
  const float* pending_ = nullptr;
  std::vector<int32_t> kept_seq_, kept_pos_;  // the last layer's rows that want logits
  std::vector<cpu::AttentionRun> attn_runs_;
  std::vector<std::vector<const void*>> kv_blocks_;  // per run: its block table as pointers
  std::vector<NextLayerHint> next_;  // layers whose experts this layer prefetches
  std::vector<cpu::MatmulTarget> qkv_ = std::vector<cpu::MatmulTarget>(3);
  MoeLayer moe_;
  std::vector<FfnJob> ffn_job_;  // dense layers and shared experts: a single job
  std::vector<MoeStepStats> moe_stats_;
  StepProfile profile_;
};

}  // namespace sy
