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

// One target for every weight type, so that one template serves them all; only the BF16
// step uses AVX-512 BF16 instructions, and the table takes it only where the CPU has them.
#define SY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))
#define SY_INLINE SY_AVX512 __attribute__((always_inline)) inline

namespace sy::cpu {
namespace {

// One step of a row dot, per weight type: kWidth values of the weight row (W) and of an
// activation row (X) as vectors V, full or masked (lanes past the end read as zero), and
// their products added into 16 f32 lanes.
struct F32Step {
  using W = float;
  using X = float;
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kWidth = 16;
  static Mask first(int64_t k) { return static_cast<Mask>((1u << k) - 1); }  // lanes [0, k)
  SY_INLINE static V load_w(const W* p) { return _mm512_loadu_ps(p); }
  SY_INLINE static V load_w(const W* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  SY_INLINE static V load_x(const X* p) { return _mm512_loadu_ps(p); }
  SY_INLINE static V load_x(const X* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  SY_INLINE static __m512 madd(__m512 acc, V w, V x) { return _mm512_fmadd_ps(w, x, acc); }
};

struct F16Step : F32Step {
  using W = uint16_t;
  SY_INLINE static V load_w(const W* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  SY_INLINE static V load_w(const W* p, Mask m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};

struct Bf16Step {
  using W = uint16_t;
  using X = uint16_t;
  using V = __m512bh;
  using Mask = __mmask32;
  static constexpr int kWidth = 32;
  static Mask first(int64_t k) { return (Mask{1} << k) - 1; }
  SY_INLINE static V load_w(const W* p) { return (V)_mm512_loadu_si512(p); }
  SY_INLINE static V load_w(const W* p, Mask m) { return (V)_mm512_maskz_loadu_epi16(m, p); }
  SY_INLINE static V load_x(const X* p) { return load_w(p); }
  SY_INLINE static V load_x(const X* p, Mask m) { return load_w(p, m); }
  SY_INLINE static __m512 madd(__m512 acc, V w, V x) { return _mm512_dpbf16_ps(acc, w, x); }
};

// NR rows (w_ld apart) against NT token rows (x_ld apart): one accumulator per (row,
// token), so each weight vector is loaded once for NT tokens and each activation vector
// once for NR rows. out[t * ld + r] for r < nr <= NR; rows past nr repeat row 0
// (computed, never stored), so that the loops have fixed bounds.
// kPrefetch (the first tile over these rows, which reads them from memory): prefetch the
// rows whole tiles and at least 8 KiB ahead. The interleaved rows of a tile read 16-21
// GB/s per thread from memory without it, 30-32 with it; the tiles after the first find
// their rows in L1, where the prefetches would only cost.
template <class S, int NR, int NT, bool kPrefetch = false>
SY_AVX512 void tile(const typename S::W* w, int64_t w_ld, int nr, const typename S::X* x, int64_t x_ld, int64_t n,
                    float* out, int64_t ld) {
  const int64_t row_bytes = w_ld * static_cast<int64_t>(sizeof(typename S::W));
  const int64_t ahead = kPrefetch ? ((8192 + row_bytes - 1) / row_bytes + NR - 1) / NR * NR * w_ld : 0;
  const typename S::W* wr[NR];
  for (int r = 0; r < NR; ++r) wr[r] = w + (r < nr ? r : 0) * w_ld;
  __m512 acc[NR][NT];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) {
    typename S::V xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = S::load_x(x + t * x_ld + i);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + i + ahead), _MM_HINT_T0);
      const typename S::V wv = S::load_w(wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = S::madd(acc[r][t], wv, xv[t]);
    }
  }
  if (i < n) {  // zeros past the end add nothing
    const typename S::Mask m = S::first(n - i);
    typename S::V xv[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) xv[t] = S::load_x(x + t * x_ld + i, m);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const typename S::V wv = S::load_w(wr[r] + i, m);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[r][t] = S::madd(acc[r][t], wv, xv[t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < nr; ++r) out[t * ld + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// The table's entry for one weight type: the token count picks the instantiation. One
// or two tokens go row by row (tiles of one row, the same chains): these small tiles are
// bound by memory (decode, or the first tile over a block of rows), and interleaved rows
// came 1.3-2x slower from memory here (4 rows at a time: 16-21 GB/s per thread against
// 28-31 for one row after the other).
template <class S>
SY_AVX512 void tiles(const typename S::W* w, int64_t w_ld, int nr, const typename S::X* x, int64_t x_ld, int nt,
                     int64_t n, float* out, int64_t ld, bool cold) {
  switch (nt) {
    case 1:
      for (int r = 0; r < nr; ++r) tile<S, 1, 1>(w + r * w_ld, w_ld, 1, x, x_ld, n, out + r, ld);
      return;
    case 2:
      for (int r = 0; r < nr; ++r) tile<S, 1, 2>(w + r * w_ld, w_ld, 1, x, x_ld, n, out + r, ld);
      return;
    case 3:
      return cold ? tile<S, kFloatTile, 3, true>(w, w_ld, nr, x, x_ld, n, out, ld)
                  : tile<S, kFloatTile, 3>(w, w_ld, nr, x, x_ld, n, out, ld);
    default:
      return cold ? tile<S, kFloatTile, 4, true>(w, w_ld, nr, x, x_ld, n, out, ld)
                  : tile<S, kFloatTile, 4>(w, w_ld, nr, x, x_ld, n, out, ld);
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
    t.f32 = tiles<F32Step>;
    t.f16 = tiles<F16Step>;
    if (__builtin_cpu_supports("avx512bf16")) {
      t.isa = "avx512-bf16";
      t.bf16 = tiles<Bf16Step>;
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
