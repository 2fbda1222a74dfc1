// tiles16 kernels (tiles16.h) on AVX-512 VNNI: a vector holds one value slice of all 16
// rows of a tile, and each token's 4 values are broadcast against it, so one vpdpbusd adds
// to 16 rows' dot products; up to 8 tokens share each unpacked line. On a Xeon guest (one
// core, 256 rows of 2048 in L2) a probe of this kernel ran 1 / 2 / 4 / 8 tokens in 8.2 /
// 10.8 / 16.3 / 25.8 us against the packed layout's 9.1 / 13.0 / 21.2 / 34.2 us
// (BM_MatmulL2), and streamed 64K rows on two threads at 4 / 8 tokens in 2.4-2.5 / 3.8 ms
// against 2.8 / 4.8 ms (docs/journal/performance.md, forty-ninth session).
#include "kernels/cpu/tiles16.h"

#include <cstring>

#include "kernels/cpu/avx512_vnni_target.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/q8_block_avx512.h"

#if defined(__x86_64__)

namespace sy::cpu {
namespace {

// Tokens [t0, t0 + M) against one tile (at `tile`, `blocks` blocks); results for row n of
// the tile at y[t * ldy + n].
template <int M>
SY_VNNI void tile_tokens(const uint8_t* tile, int64_t blocks, const Tiles16Activations& x, int64_t t0,
                         float* y, int64_t ldy, bool prefetch) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc[M];
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) acc[t] = _mm512_setzero_ps();
  Tiles16Prefetch pf(tile);
  for (int64_t b = 0; b < blocks; ++b) {
    const Tiles16Block at = tiles16_block(b, blocks);
    // The tile's bytes are read in order: (b + 1) blocks' worth once this one is done.
    if (prefetch) pf.after(tile + (b + 1) * kTiles16BlockBytes);
    __m512i wv[8];
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) {
      const __m512i v = _mm512_loadu_si512(tile + at.lines + 64 * l);
      wv[l] = _mm512_and_si512(v, low4);                            // values 4l..4l+3
      wv[l + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);  // values 16+4l..
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at.scales)));
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      const int8_t* xq = x.q(t0 + t) + b * kQBlock;
      // Two chains of 4 (the second from zero), so the dependent vpdpbusd latency halves;
      // the first starts from -8 sum(x), the nibbles' offset.
      __m512i s0 = _mm512_set1_epi32(-x.offset(t0 + t)[b]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 8; k += 2) {
        int32_t a0, a1;
        std::memcpy(&a0, xq + 4 * k, 4);
        std::memcpy(&a1, xq + 4 * k + 4, 4);
        s0 = _mm512_dpbusd_epi32(s0, wv[k], _mm512_set1_epi32(a0));
        s1 = _mm512_dpbusd_epi32(s1, wv[k + 1], _mm512_set1_epi32(a1));
      }
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(x.d(t0 + t)[b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dd, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < M; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

using TileTokens = void (*)(const uint8_t*, int64_t, const Tiles16Activations&, int64_t, float*, int64_t,
                            bool);
constexpr TileTokens kTileTokens[9] = {nullptr,        tile_tokens<1>, tile_tokens<2>,
                                       tile_tokens<3>, tile_tokens<4>, tile_tokens<5>,
                                       tile_tokens<6>, tile_tokens<7>, tile_tokens<8>};

SY_VNNI void kernel(const uint8_t* w, int64_t cols, int64_t tile0, int64_t tile1, const Tiles16Activations& x,
                    int64_t t0, int64_t t1, float* y, int64_t ldy) {
  const int64_t blocks = cols / kQBlock;
  for (int64_t g = tile0; g < tile1; ++g) {
    const uint8_t* tile = w + g * blocks * kTiles16BlockBytes;
    float* yg = y + g * kTileRows16;
    // The remainder first: the first pass reads the tile from memory, where fewer tokens
    // keep up with it better, and the full passes after it find the tile in L1.
    int64_t t = t0;
    const int64_t first = (t1 - t0) % 8 == 0 ? 8 : (t1 - t0) % 8;
    for (bool prefetch = true; t < t1; prefetch = false) {
      const int64_t m = t == t0 ? first : 8;
      kTileTokens[m](tile, blocks, x, t, yg, ldy, prefetch);
      t += m;
    }
  }
}

// quantize_row_q8_0 a block at a time (the same quants, q8_block_avx512.h).
SY_VNNI void quantize_row(const float* x, int64_t cols, int8_t* q, float* d, int32_t* offset) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const Q8BlockAvx512 blk = quantize_q8_block_avx512(x + kQBlock * b);
    d[b] = blk.d;
    offset[b] = 8 * blk.sum;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + kQBlock * b), blk.q_lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + kQBlock * b + 16), blk.q_hi);
  }
}

}  // namespace

const Tiles16Kernels* tiles16_kernels_avx512vnni() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512dq") ||
      !__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("fma") || !cpu_has_f16c()) {
    return nullptr;
  }
  static const Tiles16Kernels k{"avx512vnni", kernel, quantize_row};
  return &k;
}

}  // namespace sy::cpu
#else
namespace sy::cpu {
const Tiles16Kernels* tiles16_kernels_avx512vnni() {
  return nullptr;
}
}  // namespace sy::cpu
#endif
