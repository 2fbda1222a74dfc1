// AVX2 + FMA + F16C kernels, compiled for that target only and chosen at run time.
#include "kernels/cpu/dot.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_tiles_avx2.h"
#include "kernels/cpu/hsum_avx.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#define SY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace sy::cpu {
namespace {

// Sum of 32 products of signed bytes, as 8 int32 lanes converted to float.
SY_AVX2 inline __m256 dot_i8x32(__m256i a, __m256i b) {
  const __m256i ax = _mm256_sign_epi8(a, a);
  const __m256i sy = _mm256_sign_epi8(b, a);
  const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  return _mm256_cvtepi32_ps(p32);
}

SY_AVX2 inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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

SY_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SY_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16(p); }
SY_AVX2 inline float to_f32(float v) { return v; }
SY_AVX2 inline float to_f32(uint16_t v) { return _cvtsh_ss(v); }

// Eight int8 values as floats.
SY_AVX2 inline __m256 load8_q8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// q8_0 rows (a q8_0 KV cache), dequantized inside the dot: one scale per 32 values, applied
// once per block. Against the f16 cache walk, 16 sequences x 160 positions: 0.69-0.71x the
// time for 0.53x the bytes (standalone prototype, docs/journal/performance.md, seventh session).
SY_AVX2 void dot_heads_q8(const float* q, const BlockQ8_0* row, int nh, int group, int64_t d, float scale, float* out,
                          int64_t out_stride) {
  const int64_t nb = d / kQBlock;
  for (int h = 0; h < nh; ++h) {
    const BlockQ8_0* kr = row + int64_t{h / group} * nb;
    const float* qh = q + h * d;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const float* qb = qh + b * kQBlock;
      const int8_t* kq = kr[b].q;
      __m256 a = _mm256_mul_ps(load8_q8(kq), _mm256_loadu_ps(qb));
      a = _mm256_fmadd_ps(load8_q8(kq + 8), _mm256_loadu_ps(qb + 8), a);
      a = _mm256_fmadd_ps(load8_q8(kq + 16), _mm256_loadu_ps(qb + 16), a);
      a = _mm256_fmadd_ps(load8_q8(kq + 24), _mm256_loadu_ps(qb + 24), a);
      acc = _mm256_fmadd_ps(a, _mm256_set1_ps(_cvtsh_ss(kr[b].d)), acc);
    }
    out[h * out_stride] = hsum(acc) * scale;
  }
}

SY_AVX2 void axpy_heads_q8(const float* w, int64_t w_stride, const BlockQ8_0* row, int nh, int group, int64_t d,
                           float* out) {
  const int64_t nb = d / kQBlock;
  for (int h = 0; h < nh; ++h) {
    const BlockQ8_0* vr = row + int64_t{h / group} * nb;
    float* o = out + h * d;
    const float wh = w[h * w_stride];
    for (int64_t b = 0; b < nb; ++b) {
      const __m256 a = _mm256_set1_ps(wh * _cvtsh_ss(vr[b].d));
      float* ob = o + b * kQBlock;
      const int8_t* vq = vr[b].q;
#pragma GCC unroll 4
      for (int j = 0; j < kQBlock; j += 8) _mm256_storeu_ps(ob + j, _mm256_fmadd_ps(a, load8_q8(vq + j), _mm256_loadu_ps(ob + j)));
    }
  }
}

// The eight sums of a[0..7] in one vector, lane r = sum of a[r].
SY_AVX2 inline __m256 hsum8(const __m256 a[8]) {
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// NQ query rows x 4 keys: 8 accumulators. kSharedKeys: the rows are one head's (a prompt's
// rows), k[0] holds their keys and each key vector is loaded once for both; otherwise row i
// is a head of its own with keys k[i] (a decode row's heads two at a time: 8 accumulation
// chains instead of 4, so the FMAs no longer wait on each other's latency). A row's
// arithmetic, its lanes of hsum8 included, is the same either way and whatever NQ.
// Keys past nk repeat the last one; their scores are not stored.
template <int NQ, bool kSharedKeys, class T>
SY_AVX2 inline void dot_tile_n(const float* const* q, const T* const (*k)[4], int nk, int64_t d, float scale,
                               float* const* out) {
  auto keys = [&](int i) { return k[kSharedKeys ? 0 : i]; };
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  int64_t x = 0;
  for (; x + 8 <= d; x += 8) {
    __m256 kv[4];
    if constexpr (kSharedKeys) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) kv[j] = load8(k[0][j] + x);
    }
#pragma GCC unroll 2
    for (int i = 0; i < NQ; ++i) {
      const __m256 qv = _mm256_loadu_ps(q[i] + x);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        acc[i * 4 + j] = _mm256_fmadd_ps(qv, kSharedKeys ? kv[j] : load8(k[i][j] + x), acc[i * 4 + j]);
      }
    }
  }
  const __m256 sums = _mm256_mul_ps(hsum8(acc), _mm256_set1_ps(scale));
  if (nk == 4 && x == d) {  // a whole tile: row i's four scores are lanes 4i..4i+3
    _mm_storeu_ps(out[0], _mm256_castps256_ps128(sums));
    if (NQ == 2) _mm_storeu_ps(out[1], _mm256_extractf128_ps(sums, 1));
    return;
  }
  alignas(32) float s[8];
  _mm256_store_ps(s, sums);
  for (int i = 0; i < NQ; ++i) {
    for (int j = 0; j < nk; ++j) {
      float t = 0.0f;
      for (int64_t r = x; r < d; ++r) t += to_f32(keys(i)[j][r]) * q[i][r];
      out[i][j] = s[i * 4 + j] + t * scale;
    }
  }
}

// Head h's part of a block's cached rows (d values per KV head), rows past nk repeating
// the last one: the four rows a tile kernel reads.
template <class T>
SY_AVX2 inline void head_rows(const T* const* rows, int nk, int h, TileHeads heads, int64_t d, const T* out[4]) {
  const int64_t kv = int64_t{h / heads.group} * d;
  for (int j = 0; j < 4; ++j) out[j] = rows[std::min(j, nk - 1)] + kv;
}

template <class T>
SY_AVX2 void dot_tile(const float* q, int64_t q_ld, int64_t nq, const T* const* kp, int nk, int64_t d, float scale,
                      float* out, int64_t ld, TileHeads heads) {
  auto keys = [&](int h, const T* k[4]) { head_rows(kp, nk, h, heads, d, k); };
  int h = 0;
  if (nq == 1) {  // a decode row: heads two at a time
    for (; h + 2 <= heads.n; h += 2) {
      const T* k[2][4];
      keys(h, k[0]);
      keys(h + 1, k[1]);
      const float* qs[2] = {q + h * d, q + (h + 1) * d};
      float* outs[2] = {out + h * heads.scores_ld, out + (h + 1) * heads.scores_ld};
      dot_tile_n<2, false>(qs, k, nk, d, scale, outs);
    }
  }
  for (; h < heads.n; ++h) {
    const T* k[1][4];
    keys(h, k[0]);
    const float* qh = q + h * d;
    float* oh = out + h * heads.scores_ld;
    int64_t i = 0;
    for (; i + 2 <= nq; i += 2) {
      const float* qs[2] = {qh + i * q_ld, qh + (i + 1) * q_ld};
      float* outs[2] = {oh + i * ld, oh + (i + 1) * ld};
      dot_tile_n<2, true>(qs, k, nk, d, scale, outs);
    }
    if (i < nq) {
      const float* qs[1] = {qh + i * q_ld};
      float* outs[1] = {oh + i * ld};
      dot_tile_n<1, true>(qs, k, nk, d, scale, outs);
    }
  }
}

// NQ output rows x 4 values: the 4 NQ weights stay in registers; each value vector is
// loaded once and each output vector loaded and stored once per 4 positions.
template <int NQ, class T>
SY_AVX2 inline void axpy_tile_n(const float* w, int64_t ld, const T* const* v, int nk, int64_t d, float* const* out) {
  __m256 wv[NQ][4];
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < NQ; ++i) wv[i][j] = _mm256_set1_ps(j < nk ? w[i * ld + j] : 0.0f);
  int64_t x = 0;
  for (; x + 8 <= d; x += 8) {
    __m256 vv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) vv[j] = load8(v[j] + x);
#pragma GCC unroll 2
    for (int i = 0; i < NQ; ++i) {
      __m256 o = _mm256_loadu_ps(out[i] + x);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) o = _mm256_fmadd_ps(wv[i][j], vv[j], o);
      _mm256_storeu_ps(out[i] + x, o);
    }
  }
  for (; x < d; ++x)
    for (int i = 0; i < NQ; ++i)
      for (int j = 0; j < nk; ++j) out[i][x] += w[i * ld + j] * to_f32(v[j][x]);
}

template <class T>
SY_AVX2 void axpy_tile(const float* w, int64_t ld, int64_t nq, const T* const* vp, int nk, int64_t d, float* out,
                       int64_t out_ld, TileHeads heads) {
  for (int h = 0; h < heads.n; ++h) {
    const T* v[4];
    head_rows(vp, nk, h, heads, d, v);
    const float* wh = w + h * heads.scores_ld;
    float* oh = out + h * d;
    int64_t i = 0;
    for (; i + 2 <= nq; i += 2) {
      float* os[2] = {oh + i * out_ld, oh + (i + 1) * out_ld};
      axpy_tile_n<2>(wh + i * ld, ld, v, nk, d, os);
    }
    if (i < nq) {
      float* os[1] = {oh + i * out_ld};
      axpy_tile_n<1>(wh + i * ld, ld, v, nk, d, os);
    }
  }
}

// e^x to ~2 ulp: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor polynomial to r^6,
// 2^n put into the exponent bits. Inputs are clamped to the finite float range.
SY_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);  // ln 2 in two parts, exact n * hi
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 128]: 2^n as a float, split in two factors so that n = 128 does not overflow.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

SY_AVX2 float exp_minus_max(float* x, int64_t n, float* max_out) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float max = _mm_cvtss_f32(m4);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  *max_out = max;
  return sum;
}

SY_AVX2 void swiglu(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

SY_AVX2 double sum_squares(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  const __m256d a = _mm256_add_pd(a0, a1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

SY_AVX2 void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

SY_AVX2 void round_f16(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

// 8 floats' bits to BF16 in the low halves of the lanes, as f32_to_bf16 rounds them.
SY_AVX2 inline __m256i bf16_bits(__m256 x) {
  const __m256i v = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(v, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(v, _mm256_set1_epi32(0x400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

SY_AVX2 void to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // packus works within 128-bit halves: a0-3 b0-3 a4-7 b4-7, put back in order.
    const __m256i p = _mm256_packus_epi32(bf16_bits(_mm256_loadu_ps(x + i)), bf16_bits(_mm256_loadu_ps(x + i + 8)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permute4x64_epi64(p, 0xD8));
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

SY_AVX2 void q8_to_f32(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
#pragma GCC unroll 4
    for (int j = 0; j < kQBlock; j += 8) _mm256_storeu_ps(y + b * kQBlock + j, _mm256_mul_ps(d, load8_q8(x[b].q + j)));
  }
}

}  // namespace

const DotKernels* dot_kernels_avx2() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !cpu_has_f16c()) {
    return nullptr;
  }
  static const DotKernels k{"avx2",
                            f32_tile_avx2,
                            f16_tile_avx2,
                            bf16_tile_avx2,
                            dot_q8_0,
                            dot_q4_0,
                            axpy,
                            dot_heads_q8,
                            axpy_heads_q8,
                            dot_tile<float>,
                            axpy_tile<float>,
                            dot_tile<uint16_t>,
                            axpy_tile<uint16_t>,
                            exp_minus_max,
                            swiglu,
                            sum_squares,
                            to_f16,
                            round_f16,
                            to_bf16,
                            q8_to_f32};
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const DotKernels* dot_kernels_avx2() { return nullptr; }
}  // namespace sy::cpu
#endif
