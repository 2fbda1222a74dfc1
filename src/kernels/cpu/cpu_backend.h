// The CPU backend: the SIMD kernels of src/kernels/cpu with runtime dispatch, run as
// parallel jobs on a persistent thread pool.
#pragma once

#include "base/thread_pool.h"
#include "experts/grouped_ffn.h"
#include "kernels/backend.h"

namespace sy {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(ThreadPool& pool) : pool_(pool) {}
  std::string name() const override;
  void matmul(const WeightMatrix& w, cpu::Rows x, cpu::OutRows y) override;
  void matmul_same_input(const std::vector<cpu::MatmulTarget>& targets, cpu::Rows x) override;
  void ffn(const std::vector<FfnJob>& jobs, cpu::Rows x, cpu::OutRows out) override;
  void gather_rows(const float* x, int64_t ld, const int32_t* row_token, int64_t rows, int64_t d,
                   float* out) override;
  void combine_rows(const float* rows, const int64_t* slot, const float* weight, int64_t n, int k, int64_t d,
                    float* out, int64_t out_ld) override;
  void attention(const float* q, int64_t q_ld, const int32_t* positions,
                 const std::vector<cpu::AttentionRun>& runs, const cpu::AttentionShape& s, float* out,
                 int64_t out_ld) override;

 private:
  ThreadPool& pool_;
  cpu::MatmulScratch matmul_scratch_;
  cpu::AttentionScratch attention_scratch_;
  GroupedFfn ffn_;
};

}  // namespace sy
