// Expert activation traces: for every forward step and MoE layer, how many tokens each
// expert received. Written while a model runs (TraceWriter is a RoutingObserver) and read
// back by the offline analysis (cache-policy simulation, placement, heatmaps).
//
// Two encodings, chosen by the writer from the file name and by the reader from the
// content: a compact binary format (any name but *.jsonl) and JSON lines (*.jsonl). Both
// are specified in docs/expert-buffering.md, section "Trace format".
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "moe/routing_observer.h"

namespace sy {

struct HParams;

struct TraceInfo {
  std::string model_name;
  int n_layer = 0;              // all transformer layers
  int n_expert = 0;             // routed experts per MoE layer
  int top_k = 0;                // experts per token
  std::vector<int> moe_layers;  // the layers with routed experts, ascending
  // Static (capacity) gating drops tokens, so a layer's counts may sum to less than
  // tokens * top_k; with dynamic gating they sum to exactly that.
  bool static_gating = false;

  int n_moe() const { return static_cast<int>(moe_layers.size()); }
  // Throws sy::Error if hp is not an MoE model.
  static TraceInfo from_hparams(const HParams& hp, bool static_gating = false);
};

// A whole trace in memory: counts[(step * n_moe + moe_layer) * n_expert + expert].
struct Trace {
  TraceInfo info;
  std::vector<uint32_t> tokens;  // tokens per step
  std::vector<uint32_t> counts;

  int64_t n_steps() const { return static_cast<int64_t>(tokens.size()); }
  const uint32_t* step_layer(int64_t step, int moe_layer) const {
    return counts.data() + (step * info.n_moe() + moe_layer) * info.n_expert;
  }
  uint32_t count(int64_t step, int moe_layer, int expert) const {
    return step_layer(step, moe_layer)[expert];
  }
  // Appends one step; layer_counts holds n_moe * n_expert values.
  void add_step(uint32_t n_tokens, const std::vector<uint32_t>& layer_counts);
};

// Records every step it observes. Not thread-safe: one writer per Forward.
class TraceWriter : public RoutingObserver {
 public:
  // Opens (truncates) `path`; *.jsonl selects JSON lines. max_tokens_per_step sizes the
  // binary counts: 16 bits when it is at most 65535, else 32. Throws sy::Error.
  TraceWriter(const std::string& path, TraceInfo info, int64_t max_tokens_per_step = 65535);
  ~TraceWriter() override;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void on_routing(int layer, const Routing& routing, const DispatchPlan& plan) override;
  void on_step_end() override;
  bool needs_every_token() const override { return true; }  // every layer's counts sum to tokens x top_k
  // Finalizes the file (step count and checksum in the header, or the JSON trailer line).
  // Throws sy::Error on a write failure; the destructor closes too but swallows errors.
  void close();

  int64_t n_steps() const { return n_steps_; }
  const std::string& path() const { return path_; }

 private:
  void write_step();
  void fail(const std::string& what) const;

  std::string path_;
  TraceInfo info_;
  bool jsonl_ = false;
  int count_bytes_ = 2;
  std::ofstream out_;
  std::vector<int> moe_index_;    // model layer -> MoE layer index, -1 for dense layers
  std::vector<uint32_t> counts_;  // this step's n_moe * n_expert counts
  std::vector<uint8_t> seen_;     // which MoE layers reported this step
  uint32_t step_tokens_ = 0;
  int64_t n_steps_ = 0;
  uint32_t crc_ = 0;
  std::vector<uint8_t> record_;
  bool closed_ = false;
};

// Reads and validates a trace of either encoding. A missing, truncated, corrupt or
// inconsistent file gives a sy::Error naming the file and the problem.
Trace read_trace(const std::string& path);

// Writes a whole trace (tests, conversions). Encoding from the name as for TraceWriter.
void write_trace(const std::string& path, const Trace& trace);

}  // namespace sy
