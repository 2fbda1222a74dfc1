#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/quantize.h"

namespace sy::cpu {
namespace {

// Input rows in the form the weight's dot kernel wants.
struct PreparedInput {
  Rows f32;
  const BlockQ8_0* q8 = nullptr;
  int64_t q8_ld = 0;  // blocks per row
};

PreparedInput prepare(const WeightMatrix& w, Rows x, MatmulScratch& scratch) {
  PreparedInput in{x};
  if (takes_q8_activations(w.dtype)) {
    in.q8_ld = w.cols / kQBlock;
    BlockQ8_0* q = scratch.q8(static_cast<size_t>(in.q8_ld * x.n));
    for (int64_t t = 0; t < x.n; ++t) quantize_row_q8_0(x.data + t * x.ld, q + t * in.q8_ld, w.cols);
    in.q8 = q;
  }
  return in;
}

// Rows [r0, r1) for every token.
void compute_rows(const DotKernels& k, const WeightMatrix& w, const PreparedInput& in, OutRows y,
                  int64_t r0, int64_t r1) {
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const void* row = w.row(r);
    for (int64_t t = 0; t < in.f32.n; ++t) {
      float v;
      switch (w.dtype) {
        case DType::F32: v = k.f32(static_cast<const float*>(row), in.f32.data + t * in.f32.ld, n); break;
        case DType::F16: v = k.f16(static_cast<const uint16_t*>(row), in.f32.data + t * in.f32.ld, n); break;
        case DType::BF16: v = k.bf16(static_cast<const uint16_t*>(row), in.f32.data + t * in.f32.ld, n); break;
        case DType::Q8_0: v = k.q8_0(static_cast<const BlockQ8_0*>(row), in.q8 + t * in.q8_ld, n); break;
        case DType::Q4_0: v = k.q4_0(static_cast<const BlockQ4_0*>(row), in.q8 + t * in.q8_ld, n); break;
        default: v = 0.0f;
      }
      y.data[t * y.ld + r] = v;
    }
  }
}

// Rows per task: ~64 KiB of weights, a multiple of 16 rows (the packed kernels' row tile).
int64_t row_chunk(const WeightMatrix& w) {
  const int64_t rows = std::max<int64_t>(16, (64 << 10) / std::max<size_t>(1, w.row_bytes()));
  return rows / 16 * 16;
}

void packed_rows(const WeightMatrix& w, const PackedActivations& a, OutRows y, int64_t r0, int64_t r1) {
  const PackedKernels& k = packed_kernels();
  (w.dtype == DType::Q4_0 ? k.q4_0 : k.q8_0)(w.data, w.row_bytes(), w.cols, r0, r1, a, y.data, y.ld);
}

}  // namespace

void matmul(const WeightMatrix& w, Rows x, OutRows y, ThreadPool& pool, MatmulScratch& scratch) {
  if (x.n == 0) return;
  if (w.packed) {
    PackedActivations& a = scratch.packed();
    a.quantize(x.data, x.n, x.ld, w.cols);
    const int64_t chunk = row_chunk(w);
    pool.parallel_for((w.rows + chunk - 1) / chunk, [&](int64_t c, int) {
      packed_rows(w, a, y, c * chunk, std::min(w.rows, (c + 1) * chunk));
    });
    return;
  }
  const PreparedInput in = prepare(w, x, scratch);
  const DotKernels& k = dot_kernels();
  // Row chunks sized so each task reads ~64 KiB of weights: enough work per task to
  // amortise scheduling, and enough tasks to balance two or more threads.
  const int64_t chunk = std::max<int64_t>(4, (64 << 10) / std::max<size_t>(1, w.row_bytes()));
  const int64_t n_chunks = (w.rows + chunk - 1) / chunk;
  pool.parallel_for(n_chunks, [&](int64_t c, int) {
    compute_rows(k, w, in, y, c * chunk, std::min(w.rows, (c + 1) * chunk));
  });
}

void matmul_serial(const WeightMatrix& w, Rows x, OutRows y, MatmulScratch& scratch) {
  if (x.n == 0) return;
  if (w.packed) {
    scratch.packed().quantize(x.data, x.n, x.ld, w.cols);
    packed_rows(w, scratch.packed(), y, 0, w.rows);
    return;
  }
  const PreparedInput in = prepare(w, x, scratch);
  compute_rows(dot_kernels(), w, in, y, 0, w.rows);
}

}  // namespace sy::cpu
