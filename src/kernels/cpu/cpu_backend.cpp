#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"

namespace sy {

std::string CpuBackend::name() const {
  return std::string("cpu (") + cpu::dot_kernels().isa + ", " + cpu::packed_kernels().isa + ", " +
         std::to_string(pool_.size()) + " threads)";
}

void CpuBackend::matmul(const WeightMatrix& w, cpu::Rows x, cpu::OutRows y) {
  cpu::matmul(w, x, y, pool_, matmul_scratch_);
}

void CpuBackend::matmul_same_input(const std::vector<cpu::MatmulTarget>& targets, cpu::Rows x) {
  cpu::matmul_same_input(targets, x, pool_, matmul_scratch_);
}

void CpuBackend::ffn(const std::vector<FfnJob>& jobs, cpu::Rows x, cpu::OutRows out) {
  ffn_.run(jobs, x, out, pool_);
}

void CpuBackend::gather_rows(const float* x, int64_t ld, const int32_t* row_token, int64_t rows, int64_t d,
                             float* out) {
  pool_.parallel_for_sized(rows, rows * d, [&](int64_t r, int) {
    std::memcpy(out + r * d, x + row_token[r] * ld, static_cast<size_t>(d) * sizeof(float));
  });
}

void CpuBackend::combine_rows(const float* rows, const int64_t* slot, const float* weight, int64_t n, int k,
                              int64_t d, float* out, int64_t out_ld) {
  const auto axpy = cpu::dot_kernels().axpy;
  pool_.parallel_for_sized(n, n * k * d, [&](int64_t t, int) {
    float* o = out + t * out_ld;
    std::fill(o, o + d, 0.0f);
    for (int j = 0; j < k; ++j) {
      if (slot[t * k + j] >= 0) axpy(weight[t * k + j], rows + slot[t * k + j] * d, o, d);
    }
  });
}

void CpuBackend::attention(const float* q, int64_t q_ld, const int32_t* positions,
                           const std::vector<cpu::AttentionRun>& runs, const cpu::AttentionShape& s,
                           float* out, int64_t out_ld) {
  cpu::attention(q, q_ld, positions, runs, s, out, out_ld, pool_, attention_scratch_);
}

}  // namespace sy
