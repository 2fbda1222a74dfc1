// The kernels a layer calls, on one device. Forward and MoeLayer call these and do not know
// which device runs them: the CPU now (CpuBackend: SIMD kernels on a thread pool), CUDA
// later, behind the same calls. One backend object serves one thread of control (it holds
// the calls' scratch buffers); row buffers are host memory on the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/ffn_weights.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"

namespace sy {

// One SwiGLU FFN over its own contiguous block of token rows (an active expert, a dense
// layer, a shared expert).
struct FfnJob {
  // Held by the model or the expert store, valid while the job runs. A pointer, not a
  // copy: copying three matrices copied their names, 24 heap allocations per MoE layer.
  const FfnWeights* w = nullptr;
  int64_t row0 = 0;  // first row of this job's block in the input / output
  int64_t rows = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // y (n rows of w.rows) = x (n rows of w.cols) times w transposed.
  virtual void matmul(const WeightMatrix& w, cpu::Rows x, cpu::OutRows y) = 0;
  // Several matrices over the same input (an attention block's Q, K and V) as one job.
  virtual void matmul_same_input(const std::vector<cpu::MatmulTarget>& targets, cpu::Rows x) = 0;
  // Every job's FFN over its block of x into the same rows of out (out may not alias x);
  // each weight is read once however many rows its block has.
  virtual void ffn(const std::vector<FfnJob>& jobs, cpu::Rows x, cpu::OutRows out) = 0;
  // The MoE's token movement: out row r = x row row_token[r] (rows rows of d floats), and
  // out row t = sum over choices j of weight[t k + j] * rows row slot[t k + j] (slot < 0:
  // a dropped choice), added in choice order so a token's sum does not depend on its batch.
  virtual void gather_rows(const float* x, int64_t ld, const int32_t* row_token, int64_t rows, int64_t d,
                           float* out) = 0;
  virtual void combine_rows(const float* rows, const int64_t* slot, const float* weight, int64_t n, int k,
                            int64_t d, float* out, int64_t out_ld) = 0;
  // Causal attention of the batch's query rows over their sequences' cached K/V.
  virtual void attention(const float* q, int64_t q_ld, const int32_t* positions,
                         const std::vector<cpu::AttentionRun>& runs, const cpu::AttentionShape& s, float* out,
                         int64_t out_ld) = 0;
};

}  // namespace sy
