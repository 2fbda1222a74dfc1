// Float-weight tiles on AVX2 (FloatTile in dot.h): F32, F16 and BF16 weights, 8 lanes per
// FMA, so that each weight vector is loaded (and widened) once for two tokens and each
// activation vector once for four rows. Every (row, token) sum is formed the same way in
// every tile shape (see tile()): a token's result does not depend on the batch around it.
#include "kernels/cpu/float_tiles_avx2.h"

#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/hsum_avx.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SY_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SY_INLINE SY_AVX2 __attribute__((always_inline)) inline

namespace sy::cpu {
namespace {

// One step per weight type: 8 values of a weight row (W) and of an activation row (X) as
// f32 vectors.
struct F32Step {
  using W = float;
  using X = float;
  SY_INLINE static __m256 load_w(const W* p) { return _mm256_loadu_ps(p); }
  SY_INLINE static __m256 load_x(const X* p) { return _mm256_loadu_ps(p); }
};
struct F16Step : F32Step {
  using W = uint16_t;
  SY_INLINE static __m256 load_w(const W* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct Bf16Step {
  using W = uint16_t;
  using X = uint16_t;
  SY_INLINE static __m256 load_w(const W* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  SY_INLINE static __m256 load_x(const X* p) { return load_w(p); }
};

// The k < 8 values at p and zeros after them (zero bits are 0.0 in every type).
template <class T>
struct Padded {
  T v[8];
  Padded(const T* p, int64_t k) {
    std::memset(v, 0, sizeof v);
    std::memcpy(v, p, k * sizeof(T));
  }
};

// A tile's row and token pointers (see tile()).
template <class S, int NR, int NT>
struct TileRows {
  const typename S::W* w[NR];
  const typename S::X* x[NT];
  int64_t n;      // values per row
  int64_t ahead;  // prefetch distance, in values
};

// acc += w * x over the 8 values at i, for every row and token.
template <class S, int NR, int NT, bool kPrefetch>
SY_INLINE void step(const TileRows<S, NR, NT>& p, __m256 (&acc)[NR][NT], int64_t i) {
  constexpr int64_t kLine = 64 / sizeof(typename S::W);  // values per cache line
  __m256 xv[NT];
#pragma GCC unroll 2
  for (int t = 0; t < NT; ++t) xv[t] = S::load_x(p.x[t] + i);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    if constexpr (kPrefetch) {
      if (i % kLine == 0) _mm_prefetch(reinterpret_cast<const char*>(p.w[r] + i + p.ahead), _MM_HINT_T0);
    }
    const __m256 wv = S::load_w(p.w[r] + i);
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
  }
}

// The step at i, the values past n (a partial last step) read as zeros.
template <class S, int NR, int NT, bool kPrefetch>
SY_INLINE void step_or_pad(const TileRows<S, NR, NT>& p, __m256 (&acc)[NR][NT], int64_t i) {
  if (i + 8 <= p.n) return step<S, NR, NT, kPrefetch>(p, acc, i);
  __m256 xv[NT];
  for (int t = 0; t < NT; ++t) xv[t] = S::load_x(Padded<typename S::X>(p.x[t] + i, p.n - i).v);
  for (int r = 0; r < NR; ++r) {
    const __m256 wv = S::load_w(Padded<typename S::W>(p.w[r] + i, p.n - i).v);
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
  }
}

// NR rows (w_ld apart) against NT token rows (x_ld apart): out[t * ld + r] for r < nr and
// t < nt; rows past nr and tokens past nt repeat the first (computed, never stored), so the
// loops have fixed bounds. Each (row, token) sum is two chains, the even and the odd 8-value
// steps of the row (the last step zero-padded), added and then summed across lanes: the
// same in every tile shape. One chain per (row, token) was not enough for a single row
// (its FMA latency capped it at a third of the L2 rate); four, side by side, do not fit a
// multi-row tile's registers, and run one after another they read the rows four times.
// kPrefetch (the first tile over these rows, which reads them from memory): each row's
// line 4 KiB ahead, rounded up to whole tiles of rows.
template <class S, int NR, int NT, bool kPrefetch>
SY_AVX2 void tile(const typename S::W* w, int64_t w_ld, int nr, const typename S::X* x, int64_t x_ld, int nt, int64_t n,
                  float* out, int64_t ld) {
  const int64_t row_bytes = w_ld * static_cast<int64_t>(sizeof(typename S::W));
  TileRows<S, NR, NT> p;
  p.n = n;
  p.ahead = kPrefetch ? ((4096 + row_bytes - 1) / row_bytes + NR - 1) / NR * NR * w_ld : 0;
  for (int r = 0; r < NR; ++r) p.w[r] = w + (r < nr ? r : 0) * w_ld;
  for (int t = 0; t < NT; ++t) p.x[t] = x + (t < nt ? t : 0) * x_ld;
  __m256 acc[2][NR][NT];
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[c][r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    step<S, NR, NT, kPrefetch>(p, acc[0], i);
    step<S, NR, NT, kPrefetch>(p, acc[1], i + 8);
  }
  for (int c = 0; i < n; i += 8, ++c) step_or_pad<S, NR, NT, kPrefetch>(p, acc[c], i);
  for (int t = 0; t < nt && t < NT; ++t)
    for (int r = 0; r < nr && r < NR; ++r) out[t * ld + r] = hsum(_mm256_add_ps(acc[0][r][t], acc[1][r][t]));
}

// A table entry: up to two tokens go one row at a time (memory-bound: decode, or the first
// tile over a block of rows, where interleaved rows stream slower; the hardware prefetcher
// follows one row well enough, and a software prefetch made it slower); three or four go as
// 2-row x 2-token tiles (8 accumulators, 2 activation vectors and a weight vector in the
// 16 registers), the last token of three as a 2 x 1 tile.
template <class S>
SY_AVX2 void tiles(const typename S::W* w, int64_t w_ld, int nr, const typename S::X* x, int64_t x_ld, int nt,
                   int64_t n, float* out, int64_t ld, bool cold) {
  if (nt <= 2) {
    for (int r = 0; r < nr; ++r) {
      const typename S::W* row = w + r * w_ld;
      if (nt == 1) tile<S, 1, 1, false>(row, w_ld, 1, x, x_ld, 1, n, out + r, ld);
      else tile<S, 1, 2, false>(row, w_ld, 1, x, x_ld, 2, n, out + r, ld);
    }
    return;
  }
  for (int r = 0; r < nr; r += 2) {
    const int rows = nr - r < 2 ? 1 : 2;
    const typename S::W* wr = w + r * w_ld;
    cold ? tile<S, 2, 2, true>(wr, w_ld, rows, x, x_ld, 2, n, out + r, ld)
         : tile<S, 2, 2, false>(wr, w_ld, rows, x, x_ld, 2, n, out + r, ld);
    if (nt == 3) tile<S, 2, 1, false>(wr, w_ld, rows, x + 2 * x_ld, x_ld, 1, n, out + 2 * ld + r, ld);
    else tile<S, 2, 2, false>(wr, w_ld, rows, x + 2 * x_ld, x_ld, 2, n, out + 2 * ld + r, ld);
  }
}

}  // namespace

void f32_tile_avx2(const float* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int nt, int64_t n, float* out,
                   int64_t ld, bool cold) {
  tiles<F32Step>(w, w_ld, nr, x, x_ld, nt, n, out, ld, cold);
}
void f16_tile_avx2(const uint16_t* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int nt, int64_t n,
                   float* out, int64_t ld, bool cold) {
  tiles<F16Step>(w, w_ld, nr, x, x_ld, nt, n, out, ld, cold);
}
void bf16_tile_avx2(const uint16_t* w, int64_t w_ld, int nr, const uint16_t* x, int64_t x_ld, int nt, int64_t n,
                    float* out, int64_t ld, bool cold) {
  tiles<Bf16Step>(w, w_ld, nr, x, x_ld, nt, n, out, ld, cold);
}

}  // namespace sy::cpu
#endif
