// Packed Q4_0 / Q8_0 kernels on AVX-512 VNNI. Each pair of weight groups is unpacked once
// into registers and reused for up to 8 activation rows (register tiling across tokens).
#include "kernels/cpu/packed.h"

#include <cstring>

#include "kernels/cpu/avx512_vnni_target.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/hsum_avx.h"
#include "kernels/cpu/q8_block_avx512.h"

#if defined(__x86_64__)

namespace sy::cpu {
namespace {

SY_VNNI __attribute__((always_inline)) inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// The quant vectors of an odd last group (stored alone, see packed.h), as u8 ready for
// vpdpbusd: w[m] holds values 4m..4m+3 of every block (lane i = block i), like
// activation vector m.
template <DType T>
SY_VNNI __attribute__((always_inline)) inline void load_group(const uint8_t* g, __m256i w[8]) {
  if constexpr (T == DType::Q4_0) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const __m256i v = load256(g + 16 + 32 * m);
      w[m] = _mm256_and_si256(v, low4);
      w[4 + m] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
  } else {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) w[m] = load256(g + 16 + 32 * m);
  }
}

// Vector m of a group pair as one 512-bit load (see packed.h).
SY_VNNI __attribute__((always_inline)) inline __m512i pair_vector(const uint8_t* pair, int m) {
  return _mm512_loadu_si512(pair + 32 + 64 * m);
}
// The 16 scales of a group pair, as floats in lane order.
SY_VNNI __attribute__((always_inline)) inline __m512 pair_scales(const uint8_t* pair) {
  return _mm512_cvtph_ps(load256(pair));
}

// The quant vectors of a group pair, as u8 ready for vpdpbusd (Q4_0: low nibbles, values
// 4m..4m+3, in w[m]; high nibbles, values 16+4m..16+4m+3, in w[4 + m]).
template <DType T>
SY_VNNI __attribute__((always_inline)) inline void load_pair(const uint8_t* pair, __m512i w[8]) {
  if constexpr (T == DType::Q4_0) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const __m512i v = pair_vector(pair, m);
      w[m] = _mm512_and_si512(v, low4);
      w[4 + m] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
  } else {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) w[m] = pair_vector(pair, m);
  }
}

constexpr int bias_shift(DType t) { return t == DType::Q4_0 ? 3 : 7; }  // nibble offset 8, or the +128 bias

// The block dot products of one group (ymm) or group pair (zmm) with the matching
// activations, scaled and added to acc lane by lane:
//   acc[i] += (d_w[i] * d_x[i]) * (sum(u * x) - bias * sum(x))   for block i.
// Activation vector m sits 64 bytes after vector m - 1 (PackedActivations' pair layout).
// Two accumulation chains halve the dependent vpdpbusd latency.
template <DType T>
SY_VNNI __attribute__((always_inline)) inline __m256 group_dot(const __m256i w[8], __m256 dw, const int8_t* xq,
                                                               const float* xd, const int32_t* xs, __m256 acc) {
  auto x = reinterpret_cast<const uint8_t*>(xq);
  __m256i a0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w[0], load256(x));
  __m256i a1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w[1], load256(x + 64));
#pragma GCC unroll 3
  for (int m = 2; m < 8; m += 2) {
    a0 = _mm256_dpbusd_epi32(a0, w[m], load256(x + 64 * m));
    a1 = _mm256_dpbusd_epi32(a1, w[m + 1], load256(x + 64 * (m + 1)));
  }
  const __m256i s = _mm256_sub_epi32(_mm256_add_epi32(a0, a1),
                                     _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)), bias_shift(T)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_loadu_ps(xd)), acc);
}

// Token t's per-block terms for the group pair starting at block b: the quant sums times
// the weights' offset (bias) and the activation scales (xd).
template <DType T>
SY_VNNI __attribute__((always_inline)) inline void pair_token_terms(const PackedActivations& x, int64_t t, int64_t b,
                                                                    __m512i& bias, __m512& xd) {
  bias = _mm512_slli_epi32(_mm512_loadu_si512(x.sum(t) + b), bias_shift(T));
  xd = _mm512_loadu_ps(x.d(t) + b);
}

// acc[i] += (d_w[i] * d_x[i]) * (sum[i] - bias[i]) for the 16 blocks of a group pair.
SY_VNNI __attribute__((always_inline)) inline __m512 scale_add(__m512i sum, __m512i bias, __m512 dw, __m512 xd,
                                                               __m512 acc) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, bias)), _mm512_mul_ps(dw, xd), acc);
}

// The sums of four vectors, each bit for bit what _mm512_reduce_add_ps gives (the same
// additions in the same tree: halves, then quarters, then lanes j and j ^ 2, then 0 and 1),
// so a token's result does not depend on which path or batch computed it; transposed
// across the four, it takes 14 instructions instead of ~36.
SY_VNNI __attribute__((always_inline)) inline __m128 reduce_add4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  // [a0 lo256 + hi256 | a1 lo256 + hi256], the same for a2, a3.
  const __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0xEE), _mm512_shuffle_f32x4(a0, a1, 0x44));
  const __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0xEE), _mm512_shuffle_f32x4(a2, a3, 0x44));
  // 128-bit lane k: vector k's upper quarter + lower quarter of its 256-bit sum.
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0xDD), _mm512_shuffle_f32x4(x01, x23, 0x88));
  const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, 0x4E));   // lanes j + (j ^ 2)
  const __m512 r = _mm512_add_ps(z, _mm512_permute_ps(z, 0xB1));   // lane 0 + lane 1
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), r));
}

// What the group-pair loops leave of a row: an odd last group, then blocks past the last
// group (rows whose length is no multiple of 256). Adds their dot products to v[t].
template <DType T, int NT>
SY_VNNI __attribute__((always_inline)) inline void add_rest(const uint8_t* row, int64_t cols, int64_t g,
                                                            const PackedActivations& x, int64_t t0, float v[NT]) {
  const int64_t groups = packed_groups(cols);
  const int64_t tail = cols / kQBlock - groups * kGroupBlocks;
  if (g < groups) {
    const uint8_t* grp = row + g * packed_group_bytes(T);
    __m256i wq[8];
    load_group<T>(grp, wq);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp)));
    for (int t = 0; t < NT; ++t) {
      v[t] += hsum(group_dot<T>(wq, dw, x.group(t0 + t, g), x.d(t0 + t) + g * kGroupBlocks,
                                x.sum(t0 + t) + g * kGroupBlocks, _mm256_setzero_ps()));
    }
  }
  if (tail > 0) {
    const DotKernels& k = dot_kernels();
    const uint8_t* tw = row + groups * packed_group_bytes(T);
    for (int t = 0; t < NT; ++t) {
      v[t] += T == DType::Q4_0 ? k.q4_0(reinterpret_cast<const BlockQ4_0*>(tw), x.tail(t0 + t), tail * kQBlock)
                               : k.q8_0(reinterpret_cast<const BlockQ8_0*>(tw), x.tail(t0 + t), tail * kQBlock);
    }
  }
}

// NR weight rows (row[i], its results at out[i][t * ldy]) against activation rows
// [t0, t0 + NT). Each group pair of a row is unpacked once into registers and feeds NT
// token chains (register tiling across tokens); each activation vector is loaded once and
// feeds all NR rows (tiling across rows: half the activation loads per multiply-add). 512-bit vpdpbusd: on CPUs that split 512-bit operations (Zen 4) it still does
// twice the multiply-adds per cycle of the 256-bit form.
template <DType T, int NR, int NT, bool Prefetch = kTilePrefetches<NT>>
SY_VNNI void rows_dot(const uint8_t* const* row, int64_t cols, const PackedActivations& x, int64_t t0, float* const* out,
                      int64_t ldy, int64_t far = 0) {
  const int64_t groups = packed_groups(cols);
  const int64_t gb = packed_group_bytes(T);
  // One token alone: two chains per row, or the dependent vpdpbusd latency shows.
  constexpr int C = NT == 1 ? 2 : 1;
  __m512 acc[NR][NT];
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_setzero_ps();
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    __m512i wq[NR][8];
    __m512 dw[NR];
#pragma GCC unroll 2
    for (int i = 0; i < NR; ++i) {
      const uint8_t* grp = row[i] + g * gb;
      if constexpr (Prefetch) {
        prefetch_pair_ahead<T>(grp);
        prefetch_pair_far<T>(grp, far);
      }
      load_pair<T>(grp, wq[i]);
      dw[i] = pair_scales(grp);
    }
    // Activation vector m of every token, then m + 1: consecutive vpdpbusd belong to
    // different tokens' chains, so they issue back to back instead of waiting on each
    // other's latency (written token by token, the compiler keeps one chain at a time).
    __m512i a[NR][NT][C];
#pragma GCC unroll 2
    for (int i = 0; i < NR; ++i)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) a[i][t][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512i xv = _mm512_loadu_si512(x.group(t0 + t, g) + 64 * m);
#pragma GCC unroll 2
        for (int i = 0; i < NR; ++i) a[i][t][m % C] = _mm512_dpbusd_epi32(a[i][t][m % C], wq[i][m], xv);
      }
    }
    const int64_t b = g * kGroupBlocks;
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      __m512i bias;
      __m512 xd;
      pair_token_terms<T>(x, t0 + t, b, bias, xd);
#pragma GCC unroll 2
      for (int i = 0; i < NR; ++i) {
        const __m512i sum = C == 2 ? _mm512_add_epi32(a[i][t][0], a[i][t][C - 1]) : a[i][t][0];
        acc[i][t] = scale_add(sum, bias, dw[i], xd, acc[i][t]);
      }
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < NR; ++i) {
    alignas(16) float v[NT];
    int u = 0;
#pragma GCC unroll 2
    for (; u + 4 <= NT; u += 4) _mm_store_ps(v + u, reduce_add4(acc[i][u], acc[i][u + 1], acc[i][u + 2], acc[i][u + 3]));
#pragma GCC unroll 4
    for (; u < NT; ++u) v[u] = _mm512_reduce_add_ps(acc[i][u]);
    add_rest<T, NT>(row[i], cols, g, x, t0, v);
    for (int t = 0; t < NT; ++t) out[i][(t0 + t) * ldy] = v[t];
  }
}

// NR consecutive rows of one matrix (from `row`, row_bytes apart; results at out[i]) against
// activation rows [t0, t0 + NT): the compute-bound tile, for many tokens. On this CPU the
// kernel is bound by vector issue slots, loads included, so the tile is shaped for fewer
// instructions per vpdpbusd rather than for streaming: each activation load feeds NR rows
// (rows_dot at NR = 1 issues one load per vpdpbusd), and only the quant vectors of one m
// (Q4_0: values 4m..4m+3 and 16+4m..16+4m+3) are unpacked at a time, so the registers hold
// NR x NT accumulators (4 x 2 for Q4_0; see matrix_wide_q4_0 for the measurements).
template <DType T, int NR, int NT>
SY_VNNI void rows_dot_wide(const uint8_t* row, size_t row_bytes, int64_t cols, const PackedActivations& x, int64_t t0,
                           float* out, int64_t ldy, bool prefetch, LinePrefetch next = {}) {
  const int64_t groups = packed_groups(cols);
  const int64_t gb = packed_group_bytes(T);
  // The next block's slice, spread over the group pairs.
  const int64_t pairs = std::max<int64_t>(1, groups / 2);
  const int64_t next_per_pair = (next.lines + pairs - 1) / pairs;
  __m512 acc[NR][NT];
#pragma GCC unroll 4
  for (int i = 0; i < NR; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_setzero_ps();
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    const uint8_t* grp[NR];
    __m512 dw[NR];
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
      grp[i] = row + i * row_bytes + g * gb;
      // Only the first token tile of a row block reads the rows from memory.
      if (prefetch) prefetch_pair_ahead<T>(grp[i]);
      dw[i] = pair_scales(grp[i]);
    }
    next.issue(next_per_pair);
    __m512i a[NR][NT];
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i)
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) a[i][t] = _mm512_setzero_si512();
    if constexpr (T == DType::Q4_0) {
      const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        __m512i lo[NR], hi[NR];
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i) {
          const __m512i v = pair_vector(grp[i], m);
          lo[i] = _mm512_and_si512(v, low4);
          hi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const int8_t* xq = x.group(t0 + t, g);
          const __m512i x0 = _mm512_loadu_si512(xq + 64 * m), x1 = _mm512_loadu_si512(xq + 64 * (m + 4));
#pragma GCC unroll 4
          for (int i = 0; i < NR; ++i) {
            a[i][t] = _mm512_dpbusd_epi32(a[i][t], lo[i], x0);
            a[i][t] = _mm512_dpbusd_epi32(a[i][t], hi[i], x1);
          }
        }
      }
    } else {
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        __m512i w[NR];
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i) w[i] = pair_vector(grp[i], m);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const __m512i xv = _mm512_loadu_si512(x.group(t0 + t, g) + 64 * m);
#pragma GCC unroll 4
          for (int i = 0; i < NR; ++i) a[i][t] = _mm512_dpbusd_epi32(a[i][t], w[i], xv);
        }
      }
    }
    const int64_t b = g * kGroupBlocks;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      __m512i bias;
      __m512 xd;
      pair_token_terms<T>(x, t0 + t, b, bias, xd);
#pragma GCC unroll 4
      for (int i = 0; i < NR; ++i) acc[i][t] = scale_add(a[i][t], bias, dw[i], xd, acc[i][t]);
    }
  }
  float v[NT][NR];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    if constexpr (NR == 4) {
      _mm_storeu_ps(v[t], reduce_add4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    } else {
#pragma GCC unroll 4
      for (int i = 0; i < NR; ++i) v[t][i] = _mm512_reduce_add_ps(acc[i][t]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NR; ++i) {
    float vi[NT];
    for (int t = 0; t < NT; ++t) vi[t] = v[t][i];
    add_rest<T, NT>(row + i * row_bytes, cols, g, x, t0, vi);
    for (int t = 0; t < NT; ++t) out[i + (t0 + t) * ldy] = vi[t];
  }
}

// Rows [r0, r1) of one or two matrices of the same shape (wb, yb null for one) against
// activation rows [t0, t0 + NT). Up to 4 tokens, the two matrices go together (row r of
// both: the registers hold two unpacked rows and 2 x NT accumulators, each activation
// vector is loaded once for both). One matrix goes one row at a time: pairing its rows r
// and r + 1 the same way streamed it from memory 15-27% slower at 1-2 tokens (Q8_0 up to
// 4 tokens), and no faster at 3-4 (in-process A/B over 150 MB, 2 threads); without the
// software prefetches, batch 1 ran x0.57-0.73 that way and x0.68-0.86 with rows r and r +
// half the tile (2026-11-26). `next` (null on a first tile): each matrix's next block, a
// slice per row; `far`: the rows ahead of a single tile (rows_dot uses it from 3 tokens).
template <DType T, int NT>
SY_VNNI void tile(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                  const PackedActivations& x, int64_t t0, float* ya, float* yb, int64_t ldy,
                  NextBlockPrefetch* next = nullptr, const RowsAhead& far = {}) {
  // Tiles of 1-2 tokens prefetch too where the CPU gains by it (small_tiles_prefetch).
  const bool prefetch = kTilePrefetches<NT> || small_tiles_prefetch();
  if constexpr (NT <= 4) {
    if (wb) {
      for (int64_t r = r0; r < r1; ++r) {
        if (next) {
          next[0].slice().issue_all();
          next[1].slice().issue_all();
        }
        const uint8_t* rows[2] = {wa + r * row_bytes, wb + r * row_bytes};
        float* outs[2] = {ya + r, yb + r};
        if (prefetch) rows_dot<T, 2, NT, true>(rows, cols, x, t0, outs, ldy, far.offset(r));
        else rows_dot<T, 2, NT, false>(rows, cols, x, t0, outs, ldy);
      }
      return;
    }
  }
  for (int m = 0; m < (wb ? 2 : 1); ++m) {
    const uint8_t* w = m == 0 ? wa : wb;
    float* y = m == 0 ? ya : yb;
    for (int64_t r = r0; r < r1; ++r) {
      if (next) next[m].slice().issue_all();
      const uint8_t* rows[1] = {w + r * row_bytes};
      float* outs[1] = {y + r};
      if (prefetch) rows_dot<T, 1, NT, true>(rows, cols, x, t0, outs, ldy, far.offset(r));
      else rows_dot<T, 1, NT, false>(rows, cols, x, t0, outs, ldy);
    }
  }
}

// Rows [r0, r1) of one Q4_0 matrix against activation rows [t0, t1) with compute-bound
// tiles (rows_dot_wide): 4 rows x 2 tokens, a block of 16 rows kept hot in L1 across the
// tokens. In-process A/B against rows_dot's 8-token tiles, weights in L2, 1 thread: +7-19%
// at 5-512 tokens (2 x 4 tiles: -3 to +8%). Q8_0 has no unpacking to share and its wide
// tiles were slower (-2 to -19%, every shape tried), so it keeps rows_dot.
SY_VNNI void matrix_wide_q4_0(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                              const PackedActivations& x, int64_t t0, int64_t t1, float* y, int64_t ldy) {
  constexpr DType T = DType::Q4_0;
  // NR rows from row r over the token rows, two at a time; the tiles after the first
  // prefetch the next block (first token chunk only: later chunks find the rows in L2).
  auto rows_from = [&]<int NR>(int64_t r, NextBlockPrefetch& next) {
    const uint8_t* row = w + r * row_bytes;
    int64_t t = t0;
    for (; t + 2 <= t1; t += 2) {
      rows_dot_wide<T, NR, 2>(row, row_bytes, cols, x, t, y + r, ldy, t == 0, t > 0 ? next.slice() : LinePrefetch{});
    }
    if (t < t1) rows_dot_wide<T, NR, 1>(row, row_bytes, cols, x, t, y + r, ldy, t == 0);
  };
  for (int64_t rb = r0; rb < r1; rb += 16) {
    const int64_t re = std::min(r1, rb + 16);
    const int64_t later_tiles = (re - rb + 3) / 4 * ((t1 - t0) / 2 - 1);
    NextBlockPrefetch next;
    if (t0 == 0) next = {w, row_bytes, re, std::min(r1, re + 16), later_tiles};
    int64_t r = rb;
    for (; r + 4 <= re; r += 4) rows_from.template operator()<4>(r, next);
    for (; r < re; ++r) rows_from.template operator()<1>(r, next);
  }
}

// Rows [r0, r1) of one or two matrices against activation rows [t0, t1) with rows_dot's
// tiles: row blocks of 16 keep the activation tile of 8 tokens hot in L1 across rows.
template <DType T>
SY_VNNI void matrices_narrow(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                             const PackedActivations& x, int64_t t0, int64_t t1, float* ya, float* yb, int64_t ldy) {
  // A single tile reads the rows from memory: the rows some way ahead go to L2 (tiles of
  // 3-8 tokens, kTilePrefetches).
  const bool far_ok = t1 - t0 <= 8 && x.row_prefetch() == RowPrefetch::kNearAndFar;
  const RowsAhead far = far_ok ? RowsAhead(row_bytes, r1) : RowsAhead();
  for (int64_t rb = r0; rb < r1; rb += 16) {
    const int64_t re = std::min(r1, rb + 16);
    // The tiles after the first run on cached rows and prefetch the next block (first
    // token chunk only, as in matrix_wide_q4_0); a single tile has none to run.
    NextBlockPrefetch next[2];
    if (t0 == 0 && t1 - t0 > 8) {
      const int64_t later_rows = ((t1 - t0 + 7) / 8 - 1) * (re - rb);
      next[0] = {wa, row_bytes, re, std::min(r1, re + 16), later_rows};
      if (wb) next[1] = {wb, row_bytes, re, std::min(r1, re + 16), later_rows};
    }
    int64_t t = t0;
    for (; t + 8 <= t1; t += 8) tile<T, 8>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, t > t0 ? next : nullptr, far);
    // The rest in one tile, so the weights are unpacked once more at most.
    NextBlockPrefetch* rest = t > t0 ? next : nullptr;
    switch (t1 - t) {
      case 7: tile<T, 7>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 6: tile<T, 6>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 5: tile<T, 5>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 4: tile<T, 4>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 3: tile<T, 3>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 2: tile<T, 2>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      case 1: tile<T, 1>(wa, wb, row_bytes, cols, rb, re, x, t, ya, yb, ldy, rest, far); break;
      default: break;
    }
  }
}

// Token chunks of 256 KiB of int8 activations (128 tokens of 2048 columns), which stay in
// L2 beside a row tile's weights while every row of the tile goes over them. 512 tokens
// at once streamed 1 MB of activations from L3 per 16 rows: in-process A/B, 227 x 2048
// Q4_0 rows, 512 tokens: +22-30%; prefill 512: the q/k/v projections -17%.
constexpr int64_t kTokenChunkBytes = 256 << 10;
// From this many tokens on, a Q4_0 matrix takes the wide tiles: more than rows_dot's
// 8-token tile. At 5-8 tokens the wide tiles won in L2 (+7-10%) but lost where the
// weights stream from memory: decode of 32 sequences, whose experts get ~4 tokens each,
// in-process A/B: threshold 5 -5%, threshold 9 +1-2% against rows_dot everywhere.
constexpr int64_t kWideTokens = 9;

template <DType T>
SY_VNNI void kernel_two(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const PackedActivations& x, float* ya, float* yb, int64_t ldy) {
  const int64_t n = x.rows();
  const int64_t chunk = std::max<int64_t>(16, kTokenChunkBytes / std::max<int64_t>(cols, 1));
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t t1 = std::min(n, t0 + chunk);
    if (T == DType::Q4_0 && n >= kWideTokens) {
      matrix_wide_q4_0(wa, row_bytes, cols, r0, r1, x, t0, t1, ya, ldy);
      if (wb) matrix_wide_q4_0(wb, row_bytes, cols, r0, r1, x, t0, t1, yb, ldy);
    } else {
      matrices_narrow<T>(wa, wb, row_bytes, cols, r0, r1, x, t0, t1, ya, yb, ldy);
    }
  }
}

// rows_dot for one or two matrices (NR) and a stream's token count (1 to kStreamingTokens),
// prefetching as tile() does.
using RowsDot = void (*)(const uint8_t* const*, int64_t, const PackedActivations&, int64_t, float* const*, int64_t,
                         int64_t);
template <DType T, int NR>
RowsDot rows_dot_for(int64_t tokens) {
  static_assert(kStreamingTokens == 4);
  const bool small_prefetch = small_tiles_prefetch();
  switch (tokens) {
    case 1: return small_prefetch ? rows_dot<T, NR, 1, true> : rows_dot<T, NR, 1, false>;
    case 2: return small_prefetch ? rows_dot<T, NR, 2, true> : rows_dot<T, NR, 2, false>;
    case 3: return rows_dot<T, NR, 3, true>;
    default: return rows_dot<T, NR, 4, true>;
  }
}

// Row r of every stream, then row r + 1: a row (0.5-2.5 KiB for olmoe's experts, gate and
// up together) is about the near prefetch's distance, so while one stream's row waits on
// memory the other's computes; alternating every 9 KiB or more gained nothing in a probe
// (docs/journal/performance.md, forty-eighth session). The far prefetches stay off (the
// expert FFN's rule, RowPrefetch).
template <DType T>
void interleaved_rows(const PackedStream* s, int n, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                      int64_t ldy) {
  RowsDot dot[PackedKernels::kMaxStreams];
  for (int i = 0; i < n; ++i) {
    dot[i] = s[i].b ? rows_dot_for<T, 2>(s[i].x->rows()) : rows_dot_for<T, 1>(s[i].x->rows());
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t off = r * static_cast<int64_t>(row_bytes);
    for (int i = 0; i < n; ++i) {
      const uint8_t* rows[2] = {s[i].a + off, s[i].b ? s[i].b + off : nullptr};
      float* outs[2] = {s[i].ya + r, s[i].b ? s[i].yb + r : nullptr};
      dot[i](rows, cols, *s[i].x, 0, outs, ldy, 0);
    }
  }
}

void interleaved(const PackedStream* s, int n, DType t, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                 int64_t ldy) {
  if (t == DType::Q4_0) interleaved_rows<DType::Q4_0>(s, n, row_bytes, cols, r0, r1, ldy);
  else interleaved_rows<DType::Q8_0>(s, n, row_bytes, cols, r0, r1, ldy);
}

template <DType T>
SY_VNNI void kernel(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const PackedActivations& x, float* y, int64_t ldy) {
  kernel_two<T>(w, nullptr, row_bytes, cols, r0, r1, x, y, nullptr, ldy);
}

// quantize_row_q8_0 on 8 blocks, 16 values per vector: the same amax, scale and
// round-half-to-even (cvtps2dq in the default rounding mode), so the quants are identical.
SY_VNNI void quantize_group(const float* x, int8_t* q, float* d, int32_t* s) {
  for (int i = 0; i < kGroupBlocks; ++i) {
    const Q8BlockAvx512 blk = quantize_q8_block_avx512(x + kQBlock * i);
    d[i] = blk.d;
    s[i] = blk.sum;
    alignas(16) uint32_t w[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(w), blk.q_lo);
    _mm_store_si128(reinterpret_cast<__m128i*>(w + 4), blk.q_hi);
    for (int m = 0; m < 8; ++m) std::memcpy(q + 64 * m + 4 * i, &w[m], 4);
  }
}

// The 16 blocks of a group pair (Block: BlockQ4_0 or BlockQ8_0) to the packed layout (see
// packed.h), XOR-ing the quants with `flip`. A 16 x Words transpose of 4-byte words: lane k
// (128 bits) of z[j] takes four words of block j + 4k, and a 4 x 4 transpose inside the
// lanes leaves word m of blocks 0..15 in lane order. Everything is loaded before the
// first store, so src may be dst.
template <class Block, int Words>
SY_VNNI void pack_pair(const uint8_t* src, uint8_t* dst, uint32_t flip) {
  static_assert(Words % 4 == 0);
  constexpr size_t kBlock = sizeof(Block);
  alignas(32) uint16_t scales[16];
  for (int b = 0; b < 16; ++b) std::memcpy(&scales[b], src + kBlock * b, 2);
  __m512i r[Words];
  for (int h = 0; h < Words / 4; ++h) {
    auto words = [&](int b) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + kBlock * b + 2 + 16 * h)); };
    __m512i z[4];
    for (int j = 0; j < 4; ++j) {
      z[j] = _mm512_castsi128_si512(words(j));
      z[j] = _mm512_inserti32x4(z[j], words(j + 4), 1);
      z[j] = _mm512_inserti32x4(z[j], words(j + 8), 2);
      z[j] = _mm512_inserti32x4(z[j], words(j + 12), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    r[4 * h + 0] = _mm512_unpacklo_epi64(t0, t2);
    r[4 * h + 1] = _mm512_unpackhi_epi64(t0, t2);
    r[4 * h + 2] = _mm512_unpacklo_epi64(t1, t3);
    r[4 * h + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
  const __m512i f = _mm512_set1_epi32(static_cast<int>(flip));
  for (int m = 0; m < Words; ++m) _mm512_storeu_si512(dst + 32 + 64 * m, _mm512_xor_si512(r[m], f));
}

SY_VNNI void pack_pairs(DType t, const uint8_t* src, uint8_t* dst, int64_t pairs) {
  const int64_t pb = 2 * packed_group_bytes(t);
  for (int64_t p = 0; p < pairs; ++p) {
    // Q8_0 quants biased to unsigned, as the scalar packing does.
    if (t == DType::Q4_0) pack_pair<BlockQ4_0, 4>(src + p * pb, dst + p * pb, 0u);
    else pack_pair<BlockQ8_0, 8>(src + p * pb, dst + p * pb, 0x80808080u);
  }
}

}  // namespace

const PackedKernels* packed_kernels_avx512vnni() {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vnni") ||
      !cpu_has_f16c() || !__builtin_cpu_supports("fma")) {
    return nullptr;
  }
  static const PackedKernels k{"avx512vnni",
                               kernel<DType::Q4_0>,
                               kernel<DType::Q8_0>,
                               kernel_two<DType::Q4_0>,
                               kernel_two<DType::Q8_0>,
                               quantize_group,
                               pack_pairs,
                               /*tile_tokens=*/0,
                               interleaved};
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const PackedKernels* packed_kernels_avx512vnni() { return nullptr; }
}  // namespace sy::cpu
#endif
