// Where each (layer, expert) weight block lives and how the MoE layer gets it. The MoE
// layer only asks for the experts that received tokens, so a store can count exactly
// which weights a step touched. Everything is resident here; tiered stores (RAM over
// disk, GPU over host) implement the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "experts/ffn_weights.h"

namespace sy {

class GgufFile;
class ThreadPool;
class WeightArena;
struct HParams;

class ExpertStore {
 public:
  virtual ~ExpertStore() = default;

  // Called once per MoE layer and step with the experts that received tokens (ascending)
  // and how many tokens each got (a tiered store's frequency estimates count them).
  // Returns them split into groups to run one after another: the experts of a group are
  // acquired together, run, then released before the next group is acquired. A tiered
  // store puts the resident experts first, so they compute while the missing ones load.
  virtual void plan_layer(int layer, const std::vector<int32_t>& experts, const std::vector<int64_t>& tokens,
                          std::vector<std::vector<int32_t>>& groups) {
    (void)layer;
    (void)tokens;
    groups.assign(1, experts);
  }
  // The expert's weights, usable until release() of the same expert (may wait for I/O).
  virtual const FfnWeights& acquire(int layer, int expert) = 0;
  virtual void release(int layer, int expert) { (void)layer; (void)expert; }
  // A hint that `experts` of `layer` will probably be needed soon.
  virtual void prefetch(int layer, const std::vector<int32_t>& experts) { (void)layer; (void)experts; }
  // Called at the start of every forward step.
  virtual void begin_step() {}
  virtual size_t expert_bytes(int layer, int expert) const = 0;
};

// All experts stay in the memory-mapped model file.
class ResidentExpertStore : public ExpertStore {
 public:
  // Binds `blk.N.ffn_{gate,up,down}_exps.weight` (3-D, one slice per expert) or the older
  // per-expert layout `blk.N.ffn_{gate,up,down}.E.weight`, converted to the kernels'
  // preferred layout (copies in `arena`).
  static std::unique_ptr<ResidentExpertStore> from_gguf(const GgufFile& f, const HParams& hp,
                                                        WeightArena& arena, ThreadPool& pool);

  const FfnWeights& acquire(int layer, int expert) override { return experts_[layer][expert]; }
  size_t expert_bytes(int layer, int expert) const override { return experts_[layer][expert].bytes(); }

 private:
  std::vector<std::vector<FfnWeights>> experts_;  // [layer][expert]; empty for dense layers
};

}  // namespace sy
