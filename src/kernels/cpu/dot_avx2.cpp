// AVX2 + FMA + F16C kernels, compiled for that target only and chosen at run time.
#include "kernels/cpu/dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace sy::cpu {
namespace {

SY_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of 32 products of signed bytes, as 8 int32 lanes converted to float.
SY_AVX2 inline __m256 dot_i8x32(__m256i a, __m256i b) {
  const __m256i ax = _mm256_sign_epi8(a, a);
  const __m256i sy = _mm256_sign_epi8(b, a);
  const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  return _mm256_cvtepi32_ps(p32);
}

SY_AVX2 float dot_f32(const float* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += w[i] * x[i];
  return s;
}

SY_AVX2 inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

SY_AVX2 float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load_f16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load_f16(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load_f16(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += f16_to_f32(w[i]) * x[i];
  return s;
}

SY_AVX2 inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

SY_AVX2 float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
  return s;
}

SY_AVX2 float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[b].d) * _cvtsh_ss(x[b].d));
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].q));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
    acc = _mm256_fmadd_ps(d, dot_i8x32(qw, qx), acc);
  }
  return hsum(acc);
}

SY_AVX2 float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[b].d) * _cvtsh_ss(x[b].d));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].q));
    // Low nibbles are values 0..15, high nibbles values 16..31.
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    const __m256i qw = _mm256_sub_epi8(_mm256_and_si256(both, low4), eight);
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
    acc = _mm256_fmadd_ps(d, dot_i8x32(qw, qx), acc);
  }
  return hsum(acc);
}

SY_AVX2 void axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

SY_AVX2 void dot_rows(const float* x, const float* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                      float scale, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) out[r] = dot_f32(x, rows[r] + offset, n) * scale;
}

SY_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SY_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16(p); }
SY_AVX2 inline float to_f32(float v) { return v; }
SY_AVX2 inline float to_f32(uint16_t v) { return _cvtsh_ss(v); }

// Rows of float or f16 values: 64 outputs at a time stay in 8 registers across all rows.
template <class T>
SY_AVX2 void weighted_rows(const float* w, const T* const* rows, int64_t n_rows, int64_t offset, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(out + i + 8 * j);
    for (int64_t r = 0; r < n_rows; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const T* v = rows[r] + offset + i;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(wr, load8(v + 8 * j), acc[j]);
    }
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + i + 8 * j, acc[j]);
  }
  for (int64_t r = 0; r < n_rows && i < n; ++r)
    for (int64_t j = i; j < n; ++j) out[j] += w[r] * to_f32(rows[r][offset + j]);
}

SY_AVX2 void dot_rows_f16(const float* x, const uint16_t* const* rows, int64_t n_rows, int64_t offset, int64_t n,
                          float scale, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) out[r] = dot_f16(rows[r] + offset, x, n) * scale;
}

}  // namespace

const DotKernels* dot_kernels_avx2() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("f16c")) {
    return nullptr;
  }
  static const DotKernels k{"avx2", dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0, axpy, dot_rows, weighted_rows<float>,
                            dot_rows_f16, weighted_rows<uint16_t>};
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const DotKernels* dot_kernels_avx2() { return nullptr; }
}  // namespace sy::cpu
#endif
