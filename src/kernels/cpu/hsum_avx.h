// The horizontal sum of 8 floats, shared by the x86 kernel files. Each file compiles its
// kernels for its own target; this AVX-only helper inlines into AVX2 and AVX-512 code
// alike, and every kernel that sums 8 lanes does it in this one order (tests compare
// tables bit for bit where a result must not depend on the path).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace sy::cpu {

// (low half + high half), then its two halves, then the last two lanes.
__attribute__((target("avx"), always_inline)) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace sy::cpu
#endif
