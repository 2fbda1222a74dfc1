// The float-weight row dots on AVX-512: F32 and F16 at 16 lanes per FMA, and BF16 on
// AVX-512 BF16, where vdpbf16ps multiplies 32 BF16 pairs and adds each two neighbours
// into one f32 lane (what four AVX2 FMAs and their widening shifts do). Every other
// kernel is the AVX2 table's; Q4_0 / Q8_0 weights take the packed VNNI kernels.
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

// F32 or F16 weights (W) against float activations: four chains of 16 lanes hide the
// FMA latency when the row is in cache (prefill, batches).
template <class W>
SY_AVX512 float dot_float(const W* w, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load_w(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load_w(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load_w(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load_w(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load_w(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = first16(n - i);
    a1 = _mm512_fmadd_ps(load_w(w + i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

SY_AVX512BF16 __attribute__((always_inline)) inline __m512 dp(__m512 acc, const uint16_t* w, const uint16_t* x) {
  return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(w), (__m512bh)_mm512_loadu_si512(x));
}

SY_AVX512BF16 float dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n) {
  // Four chains hide the instruction's latency when the row is in cache (prefill).
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = dp(a0, w + i, x + i);
    a1 = dp(a1, w + i + 32, x + i + 32);
    a2 = dp(a2, w + i + 64, x + i + 64);
    a3 = dp(a3, w + i + 96, x + i + 96);
  }
  for (; i + 32 <= n; i += 32) a0 = dp(a0, w + i, x + i);
  if (i < n) {  // zeros past the end add nothing
    const __mmask32 m = first32(n - i);
    a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(m, w + i), (__m512bh)_mm512_maskz_loadu_epi16(m, x + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
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
    t.f32 = dot_float<float>;
    t.f16 = dot_float<uint16_t>;
    if (__builtin_cpu_supports("avx512bf16")) {
      t.isa = "avx512-bf16";
      t.bf16 = dot_bf16;
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
