// Float-weight tiles on AVX-512 (see FloatTile in dot.h): F32 and F16 at 16 lanes per FMA,
// and BF16 on AVX-512 BF16, where vdpbf16ps multiplies 32 BF16 pairs and adds each two
// neighbours into one f32 lane (what four AVX2 FMAs and their widening shifts do). Every
// other kernel is the AVX2 table's; Q4_0 / Q8_0 weights take the packed VNNI kernels.
#include "kernels/cpu/dot.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed intrinsics with deliberately undefined vectors, which
// -Wmaybe-uninitialized reports at every use once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#define SY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define SY_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace sy::cpu {
namespace {

// Lanes [0, k) set, k < 16 or 32: the tail of a row, with zeros past its end.
inline __mmask16 first16(int64_t k) { return static_cast<__mmask16>((1u << k) - 1); }
inline __mmask32 first32(int64_t k) { return (__mmask32{1} << k) - 1; }

// 16 weights as floats, from F32 or F16.
SY_AVX512 __attribute__((always_inline)) inline __m512 load_w(const float* p) { return _mm512_loadu_ps(p); }
SY_AVX512 __attribute__((always_inline)) inline __m512 load_w(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
SY_AVX512 __attribute__((always_inline)) inline __m512 load_w(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
SY_AVX512 __attribute__((always_inline)) inline __m512 load_w(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// The tile's weight rows; rows past nr repeat row 0 (computed, never stored), so that the
// loops below have fixed bounds.
template <class W>
inline void tile_rows(const W* w, int64_t w_ld, int nr, const W* rows[kFloatTile]) {
  for (int r = 0; r < kFloatTile; ++r) rows[r] = w + (r < nr ? r : 0) * w_ld;
}

// Up to kRowByRow tokens: each row read once, one row after the other, against all of
// them, with the one chain per (row, token) of the tiles below, so that the sums are
// formed the same way. These small tiles are bound by memory (decode, or the first tile
// over a block of rows), and the tiles' interleaved rows came 1.3-2x slower from memory
// here (4 rows at a time: 16-21 GB/s per thread against 28-31 for one row at a time).
constexpr int kRowByRow = 2;

template <class W, int NT>
SY_AVX512 void float_row(const W* w, const float* x, int64_t x_ld, int64_t n, float* out, int64_t ld) {
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 wv = load_w(w + i);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + t * x_ld + i), acc[t]);
  }
  if (i < n) {
    const __mmask16 m = first16(n - i);
    const __m512 wv = load_w(w + i, m);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + t * x_ld + i), acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[t * ld] = _mm512_reduce_add_ps(acc[t]);
}

template <int NT>
SY_AVX512BF16 void bf16_row(const uint16_t* w, const uint16_t* x, int64_t x_ld, int64_t n, float* out, int64_t ld) {
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh wv = (__m512bh)_mm512_loadu_si512(w + i);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_dpbf16_ps(acc[t], wv, (__m512bh)_mm512_loadu_si512(x + t * x_ld + i));
  }
  if (i < n) {
    const __mmask32 m = first32(n - i);
    const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + i);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_dpbf16_ps(acc[t], wv, (__m512bh)_mm512_maskz_loadu_epi16(m, x + t * x_ld + i));
    }
  }
  for (int t = 0; t < NT; ++t) out[t * ld] = _mm512_reduce_add_ps(acc[t]);
}

// F32 or F16 weights (W) against NT float token rows: 4 x NT accumulators, one per (row,
// token), so each weight vector is loaded once for NT tokens and each activation vector
// once for 4 rows.
template <class W, int NT>
SY_AVX512 void float_tile(const W* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int64_t n, float* out,
                          int64_t ld) {
  if constexpr (NT <= kRowByRow) {
    for (int r = 0; r < nr; ++r) float_row<W, NT>(w + r * w_ld, x, x_ld, n, out + r, ld);
    return;
  }
  const W* wr[kFloatTile];
  tile_rows(w, w_ld, nr, wr);
  __m512 acc[kFloatTile][NT];
#pragma GCC unroll 4
  for (int r = 0; r < kFloatTile; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = _mm512_loadu_ps(x + t * x_ld + i);
#pragma GCC unroll 4
    for (int r = 0; r < kFloatTile; ++r) {
      const __m512 wv = load_w(wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (i < n) {  // zeros past the end add nothing
    const __mmask16 m = first16(n - i);
    __m512 xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + t * x_ld + i);
#pragma GCC unroll 4
    for (int r = 0; r < kFloatTile; ++r) {
      const __m512 wv = load_w(wr[r] + i, m);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < nr; ++r) out[t * ld + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// BF16 weights against NT BF16 token rows, the same tiling with vdpbf16ps (32 values per
// step).
template <int NT>
SY_AVX512BF16 void bf16_tile(const uint16_t* w, int64_t w_ld, int nr, const uint16_t* x, int64_t x_ld, int64_t n,
                             float* out, int64_t ld) {
  if constexpr (NT <= kRowByRow) {
    for (int r = 0; r < nr; ++r) bf16_row<NT>(w + r * w_ld, x, x_ld, n, out + r, ld);
    return;
  }
  const uint16_t* wr[kFloatTile];
  tile_rows(w, w_ld, nr, wr);
  __m512 acc[kFloatTile][NT];
#pragma GCC unroll 4
  for (int r = 0; r < kFloatTile; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512bh xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = (__m512bh)_mm512_loadu_si512(x + t * x_ld + i);
#pragma GCC unroll 4
    for (int r = 0; r < kFloatTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  if (i < n) {  // zeros past the end add nothing
    const __mmask32 m = first32(n - i);
    __m512bh xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, x + t * x_ld + i);
#pragma GCC unroll 4
    for (int r = 0; r < kFloatTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < nr; ++r) out[t * ld + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// The table's entries: the token count picks the instantiation.
template <class W>
SY_AVX512 void float_tiles(const W* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int nt, int64_t n,
                           float* out, int64_t ld) {
  switch (nt) {
    case 1: return float_tile<W, 1>(w, w_ld, nr, x, x_ld, n, out, ld);
    case 2: return float_tile<W, 2>(w, w_ld, nr, x, x_ld, n, out, ld);
    case 3: return float_tile<W, 3>(w, w_ld, nr, x, x_ld, n, out, ld);
    default: return float_tile<W, 4>(w, w_ld, nr, x, x_ld, n, out, ld);
  }
}
SY_AVX512BF16 void bf16_tiles(const uint16_t* w, int64_t w_ld, int nr, const uint16_t* x, int64_t x_ld, int nt,
                              int64_t n, float* out, int64_t ld) {
  switch (nt) {
    case 1: return bf16_tile<1>(w, w_ld, nr, x, x_ld, n, out, ld);
    case 2: return bf16_tile<2>(w, w_ld, nr, x, x_ld, n, out, ld);
    case 3: return bf16_tile<3>(w, w_ld, nr, x, x_ld, n, out, ld);
    default: return bf16_tile<4>(w, w_ld, nr, x, x_ld, n, out, ld);
  }
}

}  // namespace

const DotKernels* dot_kernels_avx512() {
  const DotKernels* base = dot_kernels_avx2();
  if (!base || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl")) {
    return nullptr;
  }
  static const DotKernels k = [base] {
    DotKernels t = *base;
    t.isa = "avx512";
    t.f32 = float_tiles<float>;
    t.f16 = float_tiles<uint16_t>;
    if (__builtin_cpu_supports("avx512bf16")) {
      t.isa = "avx512-bf16";
      t.bf16 = bf16_tiles;
    }
    return t;
  }();
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const DotKernels* dot_kernels_avx512() { return nullptr; }
}  // namespace sy::cpu
#endif
