#include "experts/ffn.h"

#include "kernels/cpu/ops.h"

namespace sy {

void FfnRunner::run(const FfnWeights& w, cpu::Rows x, cpu::OutRows out, ThreadPool& pool) {
  if (x.n == 0) return;
  const int64_t ff = w.gate.rows;
  const size_t need = static_cast<size_t>(x.n * ff);
  if (gate_.size() < need) {
    gate_.resize(need);
    up_.resize(need);
  }
  cpu::matmul(w.gate, x, {gate_.data(), ff}, pool, scratch_);
  cpu::matmul(w.up, x, {up_.data(), ff}, pool, scratch_);
  cpu::swiglu(gate_.data(), up_.data(), x.n * ff);
  cpu::matmul(w.down, {gate_.data(), x.n, ff}, out, pool, scratch_);
}

}  // namespace sy
