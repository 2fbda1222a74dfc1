#include "model/model.h"

#include "base/error.h"
#include "base/memory_info.h"
#include "kernels/cpu/weight_prep.h"

namespace sy {

std::unique_ptr<Model> Model::load(const std::string& path, const ModelOptions& opt) {
  auto m = std::make_unique<Model>();
  m->file_ = GgufFile::open(path);
  m->hp_ = HParams::from_gguf(*m->file_);
  m->weights_ = ModelWeights::bind(*m->file_, m->hp_);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  m->kv_type_ = opt.kv_type;  // KvCache rejects types it cannot hold
  if (opt.kv_type == DType::Q8_0 && (m->hp_.head_dim_k % kQBlock != 0 || m->hp_.head_dim_v % kQBlock != 0)) {
    // Each head's part of a cached row must be whole 32-value blocks.
    throw Error("--kv-type q8_0 needs attention heads whose sizes are multiples of " + std::to_string(kQBlock) +
                "; this model's are " + std::to_string(m->hp_.head_dim_k) + " (K) and " +
                std::to_string(m->hp_.head_dim_v) + " (V); use f16 or f32");
  }
  // Packed weights are copied out of the file into anonymous memory, which the kernel
  // cannot evict: more than there is ends in the OOM killer, so it is checked first.
  const bool resident_experts = opt.expert_cache.empty() || !m->hp_.is_moe();
  require_available_memory(m->copied_weight_bytes(resident_experts),
                           "loading the weights (Q4_0/Q8_0 matrices repacked for the CPU kernels)",
                           m->hp_.is_moe() && resident_experts
                               ? "keep only part of the experts in memory with --expert-cache SIZE"
                               : "use a machine with more memory");
  ThreadPool pool(ThreadPool::default_threads());
  m->prepare_weights(pool);
  if (!opt.expert_cache.empty() && m->hp_.is_moe()) {
    TieredStoreOptions t = opt.tiered;
    t.budget_bytes = parse_expert_cache_size(opt.expert_cache, m->all_expert_bytes());
    m->prefetch_auto_ = t.predictive_prefetch && t.prefetch_layers <= 0;
    if (t.prefetch_layers <= 0) t.prefetch_layers = auto_prefetch_layers(t.budget_bytes, m->all_expert_bytes());
    m->experts_ = std::make_unique<TieredExpertStore>(*m->file_, m->hp_, t);
    m->prefetch_layers_ = t.predictive_prefetch ? t.prefetch_layers : 0;
  } else {
    m->experts_ = ResidentExpertStore::from_gguf(*m->file_, m->hp_, m->arena_, pool);
  }
  return m;
}

int Model::prefetch_layers() const {
  if (prefetch_auto_) return static_cast<const TieredExpertStore&>(*experts_).suggested_prefetch_layers();
  return prefetch_layers_;
}

size_t Model::all_expert_bytes() const {
  size_t n = 0;
  for (const auto& t : file_->tensors()) {
    if (is_routed_expert_tensor(t.name)) n += t.n_bytes;
  }
  return n;
}

size_t Model::dense_weight_bytes() const {
  size_t n = weights_.output.bytes() + weights_.output_norm.size() * sizeof(float);
  for (const LayerWeights& l : weights_.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.router}) n += w->bytes();
    n += l.dense.bytes() + l.shared_expert.bytes();
    n += (l.attn_norm.size() + l.ffn_norm.size() + l.q_norm.size() + l.k_norm.size() + l.shared_gate.size()) * sizeof(float);
  }
  return n;
}

template <class F>
void Model::for_each_dense_matrix(F f) {
  f(weights_.token_embd);
  if (weights_.output.data != weights_.token_embd.data) f(weights_.output);  // tied: one matrix
  for (LayerWeights& l : weights_.layers) {
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.router, &l.dense.gate, &l.dense.up, &l.dense.down,
                            &l.shared_expert.gate, &l.shared_expert.up, &l.shared_expert.down}) {
      f(*w);
    }
  }
}

// Every matrix a matmul reads may take the 16-row tiles; the token embedding only gives
// rows to look up, unless the output head shares it.
bool Model::matmul_reads(const WeightMatrix& w) const {
  return &w != &weights_.token_embd || weights_.output.data == weights_.token_embd.data;
}

void Model::prepare_weights(ThreadPool& pool) {
  const bool tied = weights_.output.data == weights_.token_embd.data;
  for_each_dense_matrix([&](WeightMatrix& w) {
    if (w.empty()) return;
    const WeightMatrix p = cpu::prepare_weight(w, arena_, pool, matmul_reads(w));
    if (p.data != w.data) file_->drop_pages(w.data, w.bytes());
    w = p;
  });
  if (tied) weights_.output = weights_.token_embd;
}

size_t Model::copied_weight_bytes(bool experts) {
  size_t n = 0;
  for_each_dense_matrix([&](WeightMatrix& w) {
    if (!w.empty() && cpu::copied_at_load(w, matmul_reads(w))) n += w.bytes();
  });
  if (!experts) return n;
  for (const GgufTensorInfo& t : file_->tensors()) {
    if (!is_routed_expert_tensor(t.name) || t.shape.empty()) continue;
    const WeightMatrix w{t.dtype, 1, t.shape[0], nullptr, t.name, t.packed};
    if (cpu::copied_at_load(w)) n += t.n_bytes;
  }
  return n;
}

}  // namespace sy
