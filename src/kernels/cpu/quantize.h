// Conversions between float rows and the GGUF block formats.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace sy::cpu {

// Q8_0 exactly as ggml quantizes activations: d = max|x|/127, q = round(x/d).
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row(DType t, const float* x, void* y, int64_t n);

// Any supported type back to float (embedding lookups, tests, conversions).
void dequantize_row(DType t, const void* x, float* y, int64_t n);

}  // namespace sy::cpu
