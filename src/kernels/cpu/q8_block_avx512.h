// One block of 32 floats to Q8_0 on AVX-512, as quantize_row_q8_0 does it: the same amax,
// scale (rounded through f16, as llama.cpp's) and round-half-to-even (cvtps2dq in the
// default rounding mode), so the quants are identical. Shared by the packed layout's
// quantizer and the 16-row tiles'; include after avx512_vnni_target.h.
#pragma once

#if defined(__x86_64__)
#include <cstdint>

namespace sy::cpu {

struct Q8BlockAvx512 {
  __m128i q_lo, q_hi;  // quants of values 0..15 and 16..31
  float d;
  int32_t sum;  // of the quants
};

SY_VNNI __attribute__((always_inline)) inline Q8BlockAvx512 quantize_q8_block_avx512(const float* x) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, lo), _mm512_andnot_ps(sign, hi)));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(id)));
  const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(id)));
  return {_mm512_cvtsepi32_epi8(qlo), _mm512_cvtsepi32_epi8(qhi),
          _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT)),
          _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi))};
}

}  // namespace sy::cpu
#endif
