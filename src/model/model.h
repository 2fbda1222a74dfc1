// A loaded model: the mapped GGUF file, its hyperparameters, bound weights, expert store
// and tokenizer. Immutable after load, so many sequences and threads can share it.
#pragma once

#include <memory>
#include <string>

#include "base/weight_arena.h"
#include "experts/expert_store.h"
#include "formats/gguf_reader.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace sy {

class Model {
 public:
  // Throws sy::Error naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& path);

  const GgufFile& file() const { return *file_; }
  const HParams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return weights_; }
  ExpertStore& experts() const { return *experts_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Bytes of the weights every step reads whatever the routing: attention, routers,
  // dense FFNs, shared experts, norms and the output head.
  size_t dense_weight_bytes() const;

 private:
  void prepare_weights(ThreadPool& pool);

  std::unique_ptr<GgufFile> file_;
  WeightArena arena_;  // weights converted at load time (before weights_ and experts_ use them)
  HParams hp_;
  ModelWeights weights_;
  std::unique_ptr<ExpertStore> experts_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace sy
