// Packed Q4_0 / Q8_0 kernels on AVX-512 VNNI (256-bit vectors, so they also run at full
// rate on CPUs that split 512-bit operations). Each weight group is unpacked once into
// registers and reused for up to 8 activation rows (register tiling across tokens).
#include "kernels/cpu/packed.h"

#include "kernels/cpu/dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SY_VNNI __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,fma,f16c")))

namespace sy::cpu {
namespace {

// The 8 quant vectors of one group, as u8 ready for vpdpbusd: pair p uses w[2p] against
// x[A 0..15 | B 0..15] and w[2p + 1] against x[A 16..31 | B 16..31].
template <DType T>
SY_VNNI __attribute__((always_inline)) inline void load_group(const uint8_t* g, __m256i w[8]) {
  if constexpr (T == DType::Q4_0) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 16 + 32 * p));
      w[2 * p] = _mm256_and_si256(v, low4);
      w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) w[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 16 + 32 * i));
  }
}

// Sum of the 8 block dot products of one group with one activation group, scaled:
// acc += (d_w * d_x) * (sum(u * x) - bias * sum(x)), lanes in kLaneBlock order.
template <DType T>
SY_VNNI __attribute__((always_inline)) inline __m256 group_dot(const __m256i w[8], __m256 dw, const int8_t* xq, const float* xd,
                                const int32_t* xs, __m256 acc) {
  __m256i a[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * p));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * p + 32));
    a[p] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w[2 * p], x0);
    a[p] = _mm256_dpbusd_epi32(a[p], w[2 * p + 1], x1);
  }
  __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  constexpr int kBiasShift = T == DType::Q4_0 ? 3 : 7;  // nibble offset 8, or the +128 bias
  s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)), kBiasShift));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(xd));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc);
}

SY_VNNI inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows [r0, r1) against activation rows [t0, t0 + NT), NR rows at a time so that each
// activation load feeds NR dot products and NR * NT accumulator chains run in parallel.
template <DType T, int NR, int NT>
SY_VNNI void tile(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                  const PackedActivations& x, int64_t t0, float* y, int64_t ldy) {
  const int64_t groups = packed_groups(cols);
  const int64_t tail = cols / kQBlock - groups * kGroupBlocks;
  const int64_t gb = packed_group_bytes(T);
  const DotKernels& k = dot_kernels();
  for (int64_t r = r0; r < r1; r += NR) {
    __m256 acc[NR][NT];
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[i][t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
#pragma GCC unroll 8
      for (int i = 0; i < NR; ++i) {
        const uint8_t* grp = w + (r + i) * row_bytes + g * gb;
        // Prefetch every cache line of the group ~4 KiB ahead: rows are streamed once.
#pragma GCC unroll 8
        for (int64_t off = 0; off < gb; off += 64) _mm_prefetch(reinterpret_cast<const char*>(grp + 4096 + off), _MM_HINT_T0);
        __m256i wq[8];
        load_group<T>(grp, wq);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp)));
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          acc[i][t] = group_dot<T>(wq, dw, x.q(t0 + t) + g * kGroupValues, x.d(t0 + t) + g * kGroupBlocks,
                                   x.sum(t0 + t) + g * kGroupBlocks, acc[i][t]);
        }
      }
    }
    for (int i = 0; i < NR; ++i) {
      const uint8_t* row = w + (r + i) * row_bytes;
      for (int t = 0; t < NT; ++t) {
        float v = hsum(acc[i][t]);
        if (tail > 0) {
          const uint8_t* tw = row + groups * gb;
          v += T == DType::Q4_0 ? k.q4_0(reinterpret_cast<const BlockQ4_0*>(tw), x.tail(t0 + t), tail * kQBlock)
                                : k.q8_0(reinterpret_cast<const BlockQ8_0*>(tw), x.tail(t0 + t), tail * kQBlock);
        }
        y[(t0 + t) * ldy + r + i] = v;
      }
    }
  }
}

template <DType T, int NT>
SY_VNNI void rows_tile(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                       const PackedActivations& x, int64_t t0, float* y, int64_t ldy) {
  constexpr int NR = 1;  // measured: interleaving rows hurts the streaming rate at small NT
  const int64_t even = r0 + (r1 - r0) / NR * NR;
  tile<T, NR, NT>(w, row_bytes, cols, r0, even, x, t0, y, ldy);
  if (even < r1) tile<T, 1, NT>(w, row_bytes, cols, even, r1, x, t0, y, ldy);
}

template <DType T>
SY_VNNI void kernel(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const PackedActivations& x, float* y, int64_t ldy) {
  // Row blocks of 16 keep the activation tile of one token chunk hot in L1 across rows.
  for (int64_t rb = r0; rb < r1; rb += 16) {
    const int64_t re = std::min(r1, rb + 16);
    int64_t t = 0;
    const int64_t n = x.rows();
    for (; t + 8 <= n; t += 8) rows_tile<T, 8>(w, row_bytes, cols, rb, re, x, t, y, ldy);
    if (n - t >= 4) { rows_tile<T, 4>(w, row_bytes, cols, rb, re, x, t, y, ldy); t += 4; }
    if (n - t >= 2) { rows_tile<T, 2>(w, row_bytes, cols, rb, re, x, t, y, ldy); t += 2; }
    if (n - t >= 1) { rows_tile<T, 1>(w, row_bytes, cols, rb, re, x, t, y, ldy); }
  }
}

}  // namespace

const PackedKernels* packed_kernels_avx512vnni() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vnni") ||
      !__builtin_cpu_supports("f16c") || !__builtin_cpu_supports("fma")) {
    return nullptr;
  }
  static const PackedKernels k{"avx512vnni", kernel<DType::Q4_0>, kernel<DType::Q8_0>};
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const PackedKernels* packed_kernels_avx512vnni() { return nullptr; }
}  // namespace sy::cpu
#endif
