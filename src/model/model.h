// A loaded model: the mapped GGUF file, its hyperparameters, bound weights, expert store
// and tokenizer. Immutable after load, so many sequences and threads can share it.
#pragma once

#include <memory>
#include <string>

#include "base/weight_arena.h"
#include "experts/expert_store.h"
#include "experts/tiered_expert_store.h"
#include "formats/gguf_reader.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace sy {

struct ModelOptions {
  // Empty: every expert resident. Otherwise the expert-buffering store: parsed by
  // parse_expert_cache_size (bytes, sizes, or a fraction of the experts).
  std::string expert_cache;
  TieredStoreOptions tiered;
  // Type of the KV caches made for this model: F32 (exact, what the reference logits were
  // recorded with) or F16 (half the memory and attention bytes, llama.cpp's default).
  DType kv_type = DType::F32;
};

class Model {
 public:
  // Throws sy::Error naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& path, const ModelOptions& opt = {});

  const GgufFile& file() const { return *file_; }
  const HParams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return weights_; }
  ExpertStore& experts() const { return *experts_; }
  // The expert-buffering store, or null when every expert is resident.
  TieredExpertStore* tiered_experts() const { return dynamic_cast<TieredExpertStore*>(experts_.get()); }
  DType kv_type() const { return kv_type_; }
  // MoE layers ahead whose experts predictive prefetch starts loading (0: none; only
  // with the expert-buffering store). Without --prefetch-layers it follows the misses the
  // store sees (TieredExpertStore::suggested_prefetch_layers).
  int prefetch_layers() const;
  bool prefetch_layers_follow_misses() const { return prefetch_auto_; }
  // Bytes of all routed experts together.
  size_t all_expert_bytes() const;
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Bytes of the weights every step reads whatever the routing: attention, routers,
  // dense FFNs, shared experts, norms and the output head.
  size_t dense_weight_bytes() const;
  // Bytes load copies out of the file into anonymous memory (weights packed for the
  // kernels; routed experts too with `experts`, when they are all resident), which load
  // checks against the memory available; and what it did copy.
  size_t copied_weight_bytes(bool experts);
  size_t copied_bytes() const { return arena_.bytes(); }

 private:
  // Applies `f` to every non-expert weight matrix prepare_weights converts.
  template <class F>
  void for_each_dense_matrix(F f);
  void prepare_weights(ThreadPool& pool);
  bool matmul_reads(const WeightMatrix& w) const;

  std::unique_ptr<GgufFile> file_;
  WeightArena arena_;  // weights converted at load time (before weights_ and experts_ use them)
  HParams hp_;
  ModelWeights weights_;
  std::unique_ptr<ExpertStore> experts_;
  std::unique_ptr<Tokenizer> tokenizer_;
  DType kv_type_ = DType::F32;
  int prefetch_layers_ = 0;
  bool prefetch_auto_ = false;
};

}  // namespace sy
