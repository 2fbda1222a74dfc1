// Random-weight GGUF models of real shapes (`switchyard synth`), for benchmarks and tests.
//
// The files carry the metadata and tensor names, shapes and types that llama.cpp expects
// for the family (olmoe, qwen2moe, qwen3moe, llama/Mixtral) plus a tokenizer, so both
// engines load them. Weights are deterministic in the seed (independent of the thread
// count) and are produced while the file is written, a block of rows at a time, so memory
// stays small whatever the model size.
//
// Scales keep activations sane through any depth: readers (attn_q/k/v, ffn_gate/up,
// routers, output) get std 1/sqrt(fan_in), writers back into the residual (attn_output,
// ffn_down) std 1/sqrt(fan_in * 2 * n_layer), norms 1, biases std 0.02. Values are
// approximately normal (Irwin-Hall sum of four 16-bit uniforms from a counter-based hash).
//
// Router skew: every token embedding holds a shared unit direction u carrying a quarter of
// its energy, and every reader row (routers included) is made orthogonal to u, so u passes
// through the residual stream unchanged, no layer turns it into a bias, and with skew 0
// routing is near uniform. With skew S the expert of rank j in a layer's random hot order
// gets a router component along u that adds about 2*S/(j+1) standard deviations to its
// logit for every token: a few experts per layer win top-k for most tokens, like trained
// models.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace sy {

class ThreadPool;

struct SynthShape {
  std::string arch;  // general.architecture: llama, olmoe, qwen2moe, qwen3moe
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;  // <arch>.context_length
  int64_t n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // 0: n_embd / n_head
  int n_expert = 0;  // 0: dense FFN (llama only)
  int n_expert_used = 0;
  int64_t n_ff = 0;        // routed expert FFN width (the dense FFN width when n_expert == 0)
  int64_t n_ff_shexp = 0;  // shared expert FFN width (qwen2moe)
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;

  int64_t head_size() const { return head_dim > 0 ? head_dim : (n_head > 0 ? n_embd / n_head : 0); }
  int64_t q_dim() const { return n_head * head_size(); }
  int64_t kv_dim() const { return n_head_kv * head_size(); }
};

struct SynthPreset {
  std::string name;
  std::string summary;  // one line for --help
  SynthShape shape;
};

// olmoe-1b-7b, qwen-moe-a2.7b, qwen3-30b-a3b, mixtral-8x7b, tiny (for tests).
const std::vector<SynthPreset>& synth_presets();
// Throws sy::Error listing the presets for an unknown name.
const SynthPreset& synth_preset(const std::string& name);

struct SynthOptions {
  SynthShape shape;
  std::string name;         // general.name; empty: "synth-<arch>"
  DType type = DType::F16;  // every 2-D and 3-D weight except the routers (always F32)
  uint64_t seed = 0;
  double router_skew = 0.0;  // 0: uniform routing
  // Empty: synthesize a byte-level BPE vocabulary of n_vocab tokens. Otherwise copy every
  // tokenizer.* key from this GGUF; a vocabulary smaller than n_vocab is padded with
  // user-defined "<|pad_N|>" tokens, a larger one truncated to its first n_vocab tokens
  // (merges and special-token ids that point past the end are dropped).
  std::string vocab_file;
};

struct SynthTensor {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // ggml order
};

// Throws sy::Error naming the command-line flag at fault (--embd, --heads, ...).
void validate_synth(const SynthOptions& o);

// The tensors of the model in file order (validates first).
std::vector<SynthTensor> synth_tensors(const SynthOptions& o);

// Experts of a MoE layer from hottest to coldest under --router-skew (the order is drawn
// from the seed; with skew 0 it has no effect).
std::vector<int> synth_hot_order(const SynthOptions& o, int layer);

struct SynthStats {
  uint64_t file_bytes = 0;
  int64_t n_params = 0;
  size_t n_tensors = 0;
};

// Writes the model to path, removing the partial file on failure. progress gets the bytes
// written so far and the total.
SynthStats write_synth_model(const std::string& path, const SynthOptions& o, ThreadPool& pool,
                             const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace sy
