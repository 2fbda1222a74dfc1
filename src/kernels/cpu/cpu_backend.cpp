#include "kernels/cpu/cpu_backend.h"

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

void CpuBackend::attention(const float* q, int64_t q_ld, const int32_t* positions,
                           const std::vector<cpu::AttentionRun>& runs, const cpu::AttentionShape& s,
                           float* out, int64_t out_ld) {
  cpu::attention(q, q_ld, positions, runs, s, out, out_ld, pool_, attention_scratch_);
}

}  // namespace sy
