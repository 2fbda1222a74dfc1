// Packed Q4_0 / Q8_0 kernels on AVX2 (CPUs without AVX-512 VNNI, such as Zen 3). A group's
// 8 blocks fill the 8 lanes of one 256-bit vector (packed.h), and the u8 x s8 dot product
// that VNNI does in one instruction takes two: vpmaddubsw (pairs of bytes to int16) and
// vpmaddwd by ones (pairs of int16 to the lane's int32). One weight row at a time (two
// for two tokens over rows already in L2) is unpacked into registers and reused for up to
// 4 activation rows.
#include "kernels/cpu/packed.h"

#include <algorithm>
#include <cstring>

#include "base/aligned_vector.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/hsum_avx.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace sy::cpu {
namespace {

SY_AVX2 __attribute__((always_inline)) inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// An empty asm that takes and gives back v in a register: the integer sums stay chains
// in registers. Without it GCC reassociates them into trees over all of a group's
// products, which hold 8 x NT vectors and spill to the stack.
SY_AVX2 __attribute__((always_inline)) inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

// Every accumulator of an NR x NT tile to zero (V: __m256i or __m256).
template <int NR, int NT, class V>
SY_AVX2 __attribute__((always_inline)) inline void set_zero(V a[NR][NT]) {
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) a[r][t] = V{};
}

// One activation row's share of a group, as row_dot reads it: the 8 quant vectors
// (vector m: values 4m..4m+3 of every block), the block sums times 8 (the Q4_0 offset) and
// the block scales. A tile stores them group by group, the tile's tokens side by side, so
// that the kernel walks one pointer with constant offsets: with PackedActivations'
// addresses (a multiply per token and group) and the register pressure they add, the
// loop ran ~50 instructions per token and group instead of ~25.
struct TileSlot {
  int8_t q[kGroupValues];
  int32_t sum8[kGroupBlocks];
  float d[kGroupBlocks];
};

// Activation rows [t0, t0 + nt) as tile slots: slot (g, t) at tile[g * nt + t].
void fill_tile(const PackedActivations& x, int64_t t0, int nt, AlignedVector<TileSlot>& tile) {
  const int64_t groups = x.groups();
  if (tile.size() < static_cast<size_t>(groups * nt)) tile.resize(groups * nt);
  for (int64_t g = 0; g < groups; ++g) {
    for (int t = 0; t < nt; ++t) {
      TileSlot& slot = tile[g * nt + t];
      const int8_t* q = x.group(t0 + t, g);
      for (int m = 0; m < 8; ++m) std::memcpy(slot.q + 32 * m, q + 64 * m, 32);
      const int32_t* s = x.sum(t0 + t) + g * kGroupBlocks;
      for (int i = 0; i < kGroupBlocks; ++i) slot.sum8[i] = s[i] * 8;
      std::memcpy(slot.d, x.d(t0 + t) + g * kGroupBlocks, sizeof slot.d);
    }
  }
}

// One group of NR weight rows (row r: scales at scales[r], quant vector m at
// q[r] + m * stride) against NT tile slots, added to acc[r][t]. Lane i of the int32 sums
// is block i's integer dot product:
//   Q4_0: nibbles u in 0..15 (value u - 8) times x; the int16 pair sums of all 8 vectors
//         add up without overflow (8 x 2 x 15 x 127 < 2^15), so one vpmaddwd per group
//         and token; the offset comes off as 8 x sum(x).
//   Q8_0: the +128 bias is undone (XOR), and vpmaddubsw takes |w| with x carrying w's
//         sign; pair sums reach 2 x 128 x 127, so each vector gets its own vpmaddwd.
// Then acc[r][t] += (d_w * d_x) * sum, lane by lane. Each (r, t) sum is formed in the same
// order whatever NR and NT are.
template <DType T, int NR, int NT>
SY_AVX2 __attribute__((always_inline)) inline void group_dot(const uint8_t* const scales[NR], const uint8_t* const q[NR],
                                                            int64_t stride, const TileSlot* slot, __m256 acc[NR][NT]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum[NR][NT];
  if constexpr (T == DType::Q4_0) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i p[NR][NT];
    set_zero<NR, NT>(p);
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      __m256i lo[NR], hi[NR];
#pragma GCC unroll 2
      for (int r = 0; r < NR; ++r) {
        const __m256i v = load256(q[r] + m * stride);
        lo[r] = _mm256_and_si256(v, low4);                         // values 4m..4m+3
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);  // values 16+4m..
      }
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i xl = load256(slot[t].q + 32 * m), xh = load256(slot[t].q + 32 * (m + 4));
#pragma GCC unroll 2
        for (int r = 0; r < NR; ++r) {
          p[r][t] = _mm256_add_epi16(p[r][t], _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], xl), _mm256_maddubs_epi16(hi[r], xh)));
          keep_in_register(p[r][t]);
        }
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) sum[r][t] = _mm256_sub_epi32(_mm256_madd_epi16(p[r][t], ones), load256(slot[t].sum8));
  } else {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    set_zero<NR, NT>(sum);
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      __m256i w[NR], aw[NR];
#pragma GCC unroll 2
      for (int r = 0; r < NR; ++r) {
        w[r] = _mm256_xor_si256(load256(q[r] + m * stride), bias);
        aw[r] = _mm256_sign_epi8(w[r], w[r]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i xq = load256(slot[t].q + 32 * m);
#pragma GCC unroll 2
        for (int r = 0; r < NR; ++r) {
          const __m256i sx = _mm256_sign_epi8(xq, w[r]);
          sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], sx), ones));
          keep_in_register(sum[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[r])));
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t)
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][t]), _mm256_mul_ps(dw, _mm256_loadu_ps(slot[t].d)), acc[r][t]);
  }
}

// NR weight rows (row k at row + k * row_bytes, its results at out[k + t * ldy]) against
// the NT activation rows of `tile`, from activation row t0 (the tail blocks of rows whose
// length is no multiple of 256 come from x). The lanes are summed once at the end: every
// token's result is formed the same way whatever NR and NT are.
template <DType T, int NR, int NT>
SY_AVX2 void row_dot(const uint8_t* row, size_t row_bytes, int64_t cols, const TileSlot* tile,
                     const PackedActivations& x, int64_t t0, float* out, int64_t ldy, bool prefetch) {
  const int64_t groups = packed_groups(cols);
  const int64_t gb = packed_group_bytes(T);
  __m256 acc[NR][NT];
  set_zero<NR, NT>(acc);
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {  // a pair: 16 bytes of scales each, then vectors interleaved (packed.h)
    const uint8_t* sa[NR];
    const uint8_t* qa[NR];
    const uint8_t* sb[NR];
    const uint8_t* qb[NR];
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      const uint8_t* pair = row + r * row_bytes + g * gb;
      if (prefetch) prefetch_pair_ahead<T>(pair);
      sa[r] = pair;
      qa[r] = pair + 32;
      sb[r] = pair + 16;
      qb[r] = pair + 64;
    }
    group_dot<T, NR, NT>(sa, qa, 64, tile + g * NT, acc);
    group_dot<T, NR, NT>(sb, qb, 64, tile + (g + 1) * NT, acc);
  }
  if (g < groups) {  // an odd last group
    const uint8_t* s1[NR];
    const uint8_t* q1[NR];
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      s1[r] = row + r * row_bytes + g * gb;
      q1[r] = s1[r] + 16;
    }
    group_dot<T, NR, NT>(s1, q1, 32, tile + g * NT, acc);
  }
  const int64_t tail = cols / kQBlock - groups * kGroupBlocks;
  for (int r = 0; r < NR; ++r) {
    const uint8_t* tw = row + r * row_bytes + groups * gb;
    for (int t = 0; t < NT; ++t) {
      float v = hsum(acc[r][t]);
      if (tail > 0) {
        const DotKernels& k = dot_kernels();
        v += T == DType::Q4_0 ? k.q4_0(reinterpret_cast<const BlockQ4_0*>(tw), x.tail(t0 + t), tail * kQBlock)
                              : k.q8_0(reinterpret_cast<const BlockQ8_0*>(tw), x.tail(t0 + t), tail * kQBlock);
      }
      out[r + (t0 + t) * ldy] = v;
    }
  }
}

// Rows [r0, r1) of one or two matrices of one shape (wb, yb null for one) against every
// activation row, in tiles of up to 4 tokens: each tile goes over all the rows (a task's
// rows, ~256 KiB, stay in L2 for the tiles after the first).
template <DType T>
SY_AVX2 void kernel_two(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const PackedActivations& x, float* ya, float* yb, int64_t ldy) {
  // Grows to the largest row, then is reused. On cache lines (320-byte slots), so that no
  // 256-bit load straddles two (as the other activation buffers; on Zen 3 a 16-byte-aligned
  // tile measured the same, within noise).
  thread_local AlignedVector<TileSlot> tile;
  const int64_t n = x.rows();
  for (int64_t t = 0; t < n; t += 4) {
    const int nt = static_cast<int>(std::min<int64_t>(4, n - t));
    fill_tile(x, t, nt, tile);
    for (int k = 0; k < (wb ? 2 : 1); ++k) {
      const uint8_t* w = k == 0 ? wa : wb;
      float* y = k == 0 ? ya : yb;
      int64_t r = r0;
      // Two tokens over rows already in L2 (a later tile): two rows per pass, which share
      // the activation loads and give the core two independent chains (BM_MatmulL2 on
      // Zen 3, six alternating pairs: Q4_0 +14% at 2048 columns and +34% at 1024, Q8_0
      // +10-13%). Not on the first tile, which streams the rows from memory: there two rows
      // per pass cut the read rate by a third (BM_Matmul at 2 tokens, one thread: Q4_0 8-9
      // -> 15 GB/s with one row, Q8_0 10 -> 17-18; the 16-sequence step's MoE time -12 to
      // -23% in three pairs). One token: no better; three tokens (two rows spill: 19 of 16
      // registers) measured 0.92-1.02 in six pairs.
      if (nt == 2 && t > 0) {
        for (; r + 2 <= r1; r += 2) row_dot<T, 2, 2>(w + r * row_bytes, row_bytes, cols, tile.data(), x, t, y + r, ldy, false);
      }
      for (; r < r1; ++r) {
        const uint8_t* row = w + r * row_bytes;
        switch (nt) {
          case 4: row_dot<T, 1, 4>(row, row_bytes, cols, tile.data(), x, t, y + r, ldy, t == 0); break;
          case 3: row_dot<T, 1, 3>(row, row_bytes, cols, tile.data(), x, t, y + r, ldy, t == 0); break;
          case 2: row_dot<T, 1, 2>(row, row_bytes, cols, tile.data(), x, t, y + r, ldy, t == 0); break;
          default: row_dot<T, 1, 1>(row, row_bytes, cols, tile.data(), x, t, y + r, ldy, t == 0); break;
        }
      }
    }
  }
}

template <DType T>
SY_AVX2 void kernel(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const PackedActivations& x, float* y, int64_t ldy) {
  kernel_two<T>(w, nullptr, row_bytes, cols, r0, r1, x, y, nullptr, ldy);
}

// quantize_row_q8_0 on 8 blocks, 8 values per vector: the same amax, scale and
// round-half-to-even (cvtps2dq in the default rounding mode), so the quants are identical.
SY_AVX2 void quantize_group(const float* x, int8_t* q, float* d, int32_t* s) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int i = 0; i < kGroupBlocks; ++i) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + kQBlock * i + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float am = _mm_cvtss_f32(m);
    const float id = am != 0.0f ? 127.0f / am : 0.0f;
    d[i] = _cvtsh_ss(_cvtss_sh(am / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    __m256i qi[4];
    for (int j = 0; j < 4; ++j) qi[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(id)));
    const __m256i total = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    __m128i st = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    st = _mm_add_epi32(st, _mm_shuffle_epi32(st, 0x4E));
    st = _mm_add_epi32(st, _mm_shuffle_epi32(st, 0xB1));
    s[i] = _mm_cvtsi128_si32(st);
    // int32 -> int8 (|q| <= 127, no saturation), back in value order after the packs'
    // per-lane interleave.
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    alignas(32) uint32_t w[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w),
                       _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    for (int k = 0; k < 8; ++k) std::memcpy(q + 64 * k + 4 * i, &w[k], 4);
  }
}

// The 8 blocks of a group (Block: BlockQ4_0 or BlockQ8_0) to the packed vectors, XOR-ing
// the quants with `flip`: an 8 x Words transpose of 4-byte words. Lane k (128 bits) of
// z[j] takes four words of block j + 4k; a 4 x 4 transpose inside the lanes leaves word m
// of blocks 0..7 in lane order. Everything is loaded before the first store, so src may
// be dst.
template <class Block, int Words>
SY_AVX2 void pack_group(const uint8_t* src, uint8_t* scales, uint8_t* q, int64_t stride, uint32_t flip) {
  constexpr size_t kBlock = sizeof(Block);
  uint16_t d[8];
  for (int b = 0; b < 8; ++b) std::memcpy(&d[b], src + kBlock * b, 2);
  __m256i r[Words];
  for (int h = 0; h < Words / 4; ++h) {
    auto words = [&](int b) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + kBlock * b + 2 + 16 * h)); };
    __m256i z[4];
    for (int j = 0; j < 4; ++j) z[j] = _mm256_inserti128_si256(_mm256_castsi128_si256(words(j)), words(j + 4), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    r[4 * h + 0] = _mm256_unpacklo_epi64(t0, t2);
    r[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
    r[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
    r[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
  }
  std::memcpy(scales, d, 16);
  const __m256i f = _mm256_set1_epi32(static_cast<int>(flip));
  for (int m = 0; m < Words; ++m) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + m * stride), _mm256_xor_si256(r[m], f));
}

SY_AVX2 void pack_pairs(DType t, const uint8_t* src, uint8_t* dst, int64_t pairs) {
  const int64_t gb = packed_group_bytes(t);
  for (int64_t p = 0; p < pairs; ++p) {
    // Both groups of the pair are read before either is written (src may be dst).
    alignas(32) uint8_t tmp[2 * 272];
    std::memcpy(tmp, src + 2 * p * gb, 2 * gb);
    for (int64_t k = 0; k < 2; ++k) {
      const PackedGroupIn<uint8_t> pg = packed_group(t, dst + 2 * p * gb, 2, k);
      // Q8_0 quants biased to unsigned, as the scalar packing does.
      if (t == DType::Q4_0) pack_group<BlockQ4_0, 4>(tmp + k * gb, pg.scales, pg.q, pg.stride, 0u);
      else pack_group<BlockQ8_0, 8>(tmp + k * gb, pg.scales, pg.q, pg.stride, 0x80808080u);
    }
  }
}

}  // namespace

const PackedKernels* packed_kernels_avx2() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c()) return nullptr;
  static const PackedKernels k{"avx2",
                               kernel<DType::Q4_0>,
                               kernel<DType::Q8_0>,
                               kernel_two<DType::Q4_0>,
                               kernel_two<DType::Q8_0>,
                               quantize_group,
                               pack_pairs};
  return &k;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const PackedKernels* packed_kernels_avx2() { return nullptr; }
}  // namespace sy::cpu
#endif
