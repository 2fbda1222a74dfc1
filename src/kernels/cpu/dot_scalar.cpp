// Portable reference kernels: the fallback on any CPU and the ground truth in tests.
#include "kernels/cpu/dot.h"

namespace sy::cpu {
namespace {

float dot_f32(const float* w, const float* x, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += w[i] * x[i];
  return s;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += f16_to_f32(w[i]) * x[i];
  return s;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
  return s;
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float s = 0.0f;
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    int32_t acc = 0;
    for (int j = 0; j < kQBlock; ++j) acc += w[b].q[j] * x[b].q[j];
    s += f16_to_f32(w[b].d) * f16_to_f32(x[b].d) * static_cast<float>(acc);
  }
  return s;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  float s = 0.0f;
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    int32_t acc = 0;
    for (int j = 0; j < kQBlock / 2; ++j) {
      acc += ((w[b].q[j] & 0x0f) - 8) * x[b].q[j];
      acc += ((w[b].q[j] >> 4) - 8) * x[b].q[j + kQBlock / 2];
    }
    s += f16_to_f32(w[b].d) * f16_to_f32(x[b].d) * static_cast<float>(acc);
  }
  return s;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void dot_rows(const float* x, const float* const* rows, int64_t n_rows, int64_t offset, int64_t n, float scale,
              float* out) {
  for (int64_t r = 0; r < n_rows; ++r) out[r] = dot_f32(x, rows[r] + offset, n) * scale;
}

void weighted_rows(const float* w, const float* const* rows, int64_t n_rows, int64_t offset, int64_t n, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) axpy(w[r], rows[r] + offset, out, n);
}

void dot_rows_f16(const float* x, const uint16_t* const* rows, int64_t n_rows, int64_t offset, int64_t n, float scale,
                  float* out) {
  for (int64_t r = 0; r < n_rows; ++r) out[r] = dot_f16(rows[r] + offset, x, n) * scale;
}

void weighted_rows_f16(const float* w, const uint16_t* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                       float* out) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) out[i] += w[r] * f16_to_f32(rows[r][offset + i]);
}

}  // namespace

const DotKernels& dot_kernels_scalar() {
  static const DotKernels k{"scalar", dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0, axpy, dot_rows, weighted_rows,
                            dot_rows_f16, weighted_rows_f16};
  return k;
}

}  // namespace sy::cpu
