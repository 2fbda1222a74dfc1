// Row dot products, one per weight type, with runtime CPU dispatch. Float weights take
// float activations; quantized weights take activations quantized to Q8_0 (integer dot
// products inside each 32-value block, scaled once per block), as llama.cpp does.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace sy::cpu {

struct DotKernels {
  const char* isa;
  float (*f32)(const float* w, const float* x, int64_t n);
  float (*f16)(const uint16_t* w, const float* x, int64_t n);
  float (*bf16)(const uint16_t* w, const float* x, int64_t n);
  float (*q8_0)(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
  float (*q4_0)(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y += a * x
  // out[r] = scale * dot(x, rows[r] + offset) for r < n_rows, each over n values
  // (attention scores against cached keys; same sums as f32).
  void (*dot_rows)(const float* x, const float* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                   float scale, float* out);
  // out[i] += w[r] * (rows[r] + offset)[i] for r in order, i < n (attention's weighted
  // values, accumulated in registers; the same sums as axpy row by row).
  void (*weighted_rows)(const float* w, const float* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                        float* out);
  // The same over rows of f16 values (an f16 KV cache).
  void (*dot_rows_f16)(const float* x, const uint16_t* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                       float scale, float* out);
  void (*weighted_rows_f16)(const float* w, const uint16_t* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                            float* out);
};

// Best kernels for this CPU, chosen once; SY_ISA=scalar in the environment forces the
// portable reference kernels.
const DotKernels& dot_kernels();
const DotKernels& dot_kernels_scalar();
// nullptr when the CPU lacks AVX2/FMA/F16C.
const DotKernels* dot_kernels_avx2();

// True when weights of this type take Q8_0 activations.
inline bool takes_q8_activations(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }

}  // namespace sy::cpu
