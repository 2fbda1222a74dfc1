// tiles16 kernels (tiles16.h) on AMX int8 tiles, with the tokens as the rows of the first
// operand (M = up to 16 tokens, K = one block's 32 values) and a block's four lines, split
// into nibbles less 8, as the second (16 weight rows x 4 values a row): each block of a
// tile is one signed tile multiply, with no transposes. Its products are scaled with the
// float steps of the VNNI kernels, so both give the same bits. A tile multiply of up to 8
// token rows issues every 3.3 ns on a Xeon guest, of 16 rows every 5.7 ns. One core, 256
// rows of 2048 in L2 (`BM_MatmulTiles16L2`): 8 / 16 tokens in 15-16 / 23-24 us, against
// 25.8 / 51.7 us for the VNNI kernels on this layout and 34 / 57 us for the packed layout's
// best (docs/journal/performance.md, forty-ninth session); unsigned nibbles with `tdpbsud`
// and the offset taken off each product row (as the VNNI kernels start from it) took 22 /
// 32 us. Each token chunk splits the tile's nibbles again: keeping the first chunk's for the
// later ones (a 32 KiB buffer instead of a ring of four blocks) gained nothing at 64 tokens
// and cost 8 tokens ~15%. Fewer than kAmxTokens tokens go to the VNNI kernels.
#include "kernels/cpu/tiles16.h"

#include <algorithm>

#include "kernels/cpu/packed.h"

#include "kernels/cpu/amx_target.h"

#if defined(__x86_64__) && defined(__linux__)

namespace sy::cpu {
namespace {

// From this many tokens in a chunk of 16 the tiles run; fewer go to the VNNI kernels (probe,
// from memory on two threads: 4 tokens 2.9 against 2.5 ms, 8 tokens 3.5 against 3.9 ms).
constexpr int64_t kAmxTokens = 6;

// tmm0-3: products (M tokens x 16 int32); tmm4, tmm6: activations (M x 32 int8); tmm5,
// tmm7: weights (8 rows of 16 rows x 4 nibbles).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 32, 64, 32, 64};
  uint8_t rows[16] = {};
  explicit TileConfig(int m) {
    for (int i : {0, 1, 2, 3, 4, 6}) rows[i] = static_cast<uint8_t>(m);
    rows[5] = rows[7] = 8;
  }
};

struct Scratch {
  alignas(64) uint8_t b[4][512];        // the weights of the last four blocks, nibbles less 8
  alignas(64) int32_t c[4][16 * 16];    // products stored and not yet scaled
};

// Tokens [t0, t0 + M) against one tile. Block k is split at step k, multiplied at k + 1,
// stored at k + 2 and scaled at k + 3: a stored tile's bytes reach the vector loads only
// once the store has completed (packed_amx.cpp measured the same for its products).
template <int M>
SY_AMX void tile_tokens(const uint8_t* tile, int64_t blocks, const Tiles16Activations& x, int64_t t0, float* y,
                          int64_t ldy, bool prefetch, Scratch& s) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  __m512 acc[M];
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) acc[t] = _mm512_setzero_ps();
  __m512 dw[4];
  // Locals, not x's members: every tile instruction clobbers memory, so members would be
  // reloaded after each.
  const int64_t stride = x.cols();
  Tiles16Prefetch pf(tile);
  const int8_t* const xq = x.q(t0);
  const float* const xd = x.d(t0);
  for (int64_t k = 0; k < blocks + 3; ++k) {
    if (k < blocks) {
      const Tiles16Block at = tiles16_block(k, blocks);
      if (prefetch) pf.after(tile + (k + 1) * kTiles16BlockBytes);
      uint8_t* bb = s.b[k & 3];
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) {
        const __m512i v = _mm512_loadu_si512(tile + at.lines + 64 * l);
        _mm512_store_si512(bb + 64 * l, _mm512_sub_epi8(_mm512_and_si512(v, low4), eight));
        _mm512_store_si512(bb + 64 * (l + 4), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), eight));
      }
      dw[k & 3] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at.scales)));
    }
    if (const int64_t p = k - 1; p >= 0 && p < blocks) {
      const int8_t* a = xq + p * kQBlock;
      const uint8_t* b = s.b[p & 3];
      switch (p & 3) {
        case 0: SY_TILE_LOAD(4, a, stride); SY_TILE_LOAD(5, b, 64); SY_TILE_ZERO(0); SY_TILE_DPBSSD(0, 4, 5); break;
        case 1: SY_TILE_LOAD(6, a, stride); SY_TILE_LOAD(7, b, 64); SY_TILE_ZERO(1); SY_TILE_DPBSSD(1, 6, 7); break;
        case 2: SY_TILE_LOAD(4, a, stride); SY_TILE_LOAD(5, b, 64); SY_TILE_ZERO(2); SY_TILE_DPBSSD(2, 4, 5); break;
        default: SY_TILE_LOAD(6, a, stride); SY_TILE_LOAD(7, b, 64); SY_TILE_ZERO(3); SY_TILE_DPBSSD(3, 6, 7); break;
      }
    }
    if (const int64_t q = k - 2; q >= 0 && q < blocks) {
      switch (q & 3) {
        case 0: SY_TILE_STORE(0, s.c[0], 64); break;
        case 1: SY_TILE_STORE(1, s.c[1], 64); break;
        case 2: SY_TILE_STORE(2, s.c[2], 64); break;
        default: SY_TILE_STORE(3, s.c[3], 64); break;
      }
    }
    if (const int64_t q = k - 3; q >= 0) {
      const int32_t* c = s.c[q & 3];
      const __m512 d = dw[q & 3];
#pragma GCC unroll 16
      for (int t = 0; t < M; ++t) {
        const __m512i v = _mm512_load_si512(c + 16 * t);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(d, _mm512_set1_ps(xd[t * blocks + q])), acc[t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < M; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

using TileTokens = void (*)(const uint8_t*, int64_t, const Tiles16Activations&, int64_t, float*, int64_t, bool,
                            Scratch&);
constexpr TileTokens kTileTokens[17] = {
    nullptr,         nullptr,         nullptr,         nullptr,         nullptr,         nullptr,
    tile_tokens<6>,  tile_tokens<7>,  tile_tokens<8>,  tile_tokens<9>,  tile_tokens<10>, tile_tokens<11>,
    tile_tokens<12>, tile_tokens<13>, tile_tokens<14>, tile_tokens<15>, tile_tokens<16>};
static_assert(kAmxTokens == 6);

SY_AMX void kernel(const uint8_t* w, int64_t cols, int64_t tile0, int64_t tile1, const Tiles16Activations& x,
                     int64_t t0, int64_t t1, float* y, int64_t ldy) {
  static const Tiles16Kernel vnni = tiles16_kernels_avx512vnni()->q4_0;
  const int64_t blocks = cols / kQBlock;
  thread_local Scratch s;
  int configured = 0;  // the token rows the loaded tile configuration has
  for (int64_t g = tile0; g < tile1; ++g) {
    const uint8_t* tile = w + g * blocks * kTiles16BlockBytes;
    for (int64_t t = t0; t < t1; t += 16) {
      const int64_t m = std::min<int64_t>(16, t1 - t);
      if (m < kAmxTokens) {
        vnni(w, cols, g, g + 1, x, t, t + m, y, ldy);
        continue;
      }
      if (configured != m) {
        const TileConfig config(static_cast<int>(m));
        _tile_loadconfig(&config);
        configured = static_cast<int>(m);
      }
      kTileTokens[m](tile, blocks, x, t, y + g * kTileRows16, ldy, t == t0, s);
    }
  }
  if (configured) _tile_release();  // the thread's next context switches save no tile state
}

}  // namespace

const Tiles16Kernels* tiles16_kernels_amx() {
  static const Tiles16Kernels* table = []() -> const Tiles16Kernels* {
    // packed_kernels_amx() checks the CPU and asks Linux for the tile state.
    if (!packed_kernels_amx() || !tiles16_kernels_avx512vnni()) return nullptr;
    static const Tiles16Kernels k{"amx", kernel, tiles16_kernels_avx512vnni()->quantize_row};
    return &k;
  }();
  return table;
}

}  // namespace sy::cpu
#else
namespace sy::cpu {
const Tiles16Kernels* tiles16_kernels_amx() { return nullptr; }
}  // namespace sy::cpu
#endif
