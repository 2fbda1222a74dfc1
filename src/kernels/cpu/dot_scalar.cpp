// Portable reference kernels: the fallback on any CPU and the ground truth in tests.
#include "kernels/cpu/dot.h"

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantize.h"

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

float dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(w[i]) * bf16_to_f32(x[i]);
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

template <class T>
float to_float(T v) {
  if constexpr (sizeof(T) == 2) return f16_to_f32(v);
  else return v;
}

// Value i of a row of q8_0 blocks.
float q8_value(const BlockQ8_0* row, int64_t i) {
  const BlockQ8_0& b = row[i / kQBlock];
  return f16_to_f32(b.d) * static_cast<float>(b.q[i % kQBlock]);
}

void dot_heads_q8(const float* q, const BlockQ8_0* row, int nh, int group, int64_t d, float scale, float* out,
                  int64_t out_stride) {
  for (int h = 0; h < nh; ++h) {
    const BlockQ8_0* kr = row + int64_t{h / group} * (d / kQBlock);
    float s = 0.0f;
    for (int64_t i = 0; i < d; ++i) s += q8_value(kr, i) * q[h * d + i];
    out[h * out_stride] = s * scale;
  }
}

void axpy_heads_q8(const float* w, int64_t w_stride, const BlockQ8_0* row, int nh, int group, int64_t d, float* out) {
  for (int h = 0; h < nh; ++h) {
    const BlockQ8_0* vr = row + int64_t{h / group} * (d / kQBlock);
    for (int64_t i = 0; i < d; ++i) out[h * d + i] += w[h * w_stride] * q8_value(vr, i);
  }
}

template <class T>
void dot_tile(const float* q, int64_t q_ld, int64_t nq, const T* const* k, int nk, int64_t d, float scale, float* out,
              int64_t ld, TileHeads heads) {
  for (int h = 0; h < heads.n; ++h) {
    const int64_t kv = int64_t{h / heads.group} * d;
    for (int64_t i = 0; i < nq; ++i) {
      for (int j = 0; j < nk; ++j) {
        float s = 0.0f;
        for (int64_t x = 0; x < d; ++x) s += to_float(k[j][kv + x]) * q[i * q_ld + h * d + x];
        out[h * heads.scores_ld + i * ld + j] = s * scale;
      }
    }
  }
}

template <class T>
void axpy_tile(const float* w, int64_t ld, int64_t nq, const T* const* v, int nk, int64_t d, float* out, int64_t out_ld,
               TileHeads heads) {
  for (int h = 0; h < heads.n; ++h) {
    const int64_t kv = int64_t{h / heads.group} * d;
    for (int64_t i = 0; i < nq; ++i)
      for (int j = 0; j < nk; ++j)
        for (int64_t x = 0; x < d; ++x)
          out[i * out_ld + h * d + x] += w[h * heads.scores_ld + i * ld + j] * to_float(v[j][kv + x]);
  }
}

double sum_squares(const float* x, int64_t n) {
  // Four partial sums: one dependent chain of double adds would cost ~4 cycles a value.
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) part[j] += static_cast<double>(x[i + j] * x[i + j]);
  for (; i < n; ++i) part[0] += static_cast<double>(x[i] * x[i]);
  return (part[0] + part[1]) + (part[2] + part[3]);
}

float exp_minus_max_f32(float* x, int64_t n, float* max) { return static_cast<float>(exp_minus_max(x, n, max)); }

void to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void round_f16(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

void to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void q8_to_f32(const BlockQ8_0* x, float* y, int64_t n) { dequantize_row(DType::Q8_0, x, y, n); }

}  // namespace

const DotKernels& dot_kernels_scalar() {
  static const DotKernels k{"scalar",
                            tile_of_dots<float, float, dot_f32>,
                            tile_of_dots<uint16_t, float, dot_f16>,
                            tile_of_dots<uint16_t, uint16_t, dot_bf16>,
                            dot_q8_0,
                            dot_q4_0,
                            axpy,
                            dot_heads_q8,
                            axpy_heads_q8,
                            dot_tile<float>,
                            axpy_tile<float>,
                            dot_tile<uint16_t>,
                            axpy_tile<uint16_t>,
                            exp_minus_max_f32,
                            swiglu,
                            sum_squares,
                            to_f16,
                            round_f16,
                            to_bf16,
                            q8_to_f32};
  return k;
}

}  // namespace sy::cpu
