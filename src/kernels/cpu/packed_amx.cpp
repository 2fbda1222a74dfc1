// Packed Q4_0 / Q8_0 kernels on AMX int8 tiles, for many activation rows: 16 weight rows x
// 16 tokens per block of 32 values in one tile multiply. Each block's integer dot products
// are exact either way, so with the float steps of the AVX-512 VNNI kernels in the same
// order (below) a token's results are bit for bit the ones it gets alone through them: the
// server's batches and a request run by itself agree.
//
// The VNNI kernels keep, per (row, token), 16 float lanes, lane l summing blocks l, 16 + l,
// 32 + l, ... as acc = fma(float(dot), d_w * d_x, acc), and reduce the lanes at the end as
// _mm512_reduce_add_ps does. Here, for each lane l, the tile products of blocks l, 16 + l,
// ... are scaled and summed in that order into 16 vectors over the tokens (one per weight
// row), the 16 lanes' sums are kept, and the same reduction tree runs across them.
#include "kernels/cpu/packed.h"

#include <cstring>

#include "kernels/cpu/amx_target.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/cpu/cpu_features.h"

namespace sy::cpu {
namespace {

constexpr int64_t kRows = 16;                               // weight rows per tile
constexpr int64_t kTokens = PackedActivations::kTileRows;  // tokens per tile
// From this many activation rows on, the tiles run (fewer: the VNNI kernels).
constexpr int64_t kTileTokens = 16;

// The tile shapes: tmm0-3 the 16 x 16 int32 products, tmm4 and tmm6 16 weight rows x 32
// int8 (one block each), tmm5 and tmm7 the activations' 8 x 64-byte tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 32, 64, 32, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 8, 16, 8};
};

// The unpacked weights of a row tile (unpack_rows) in units of 16 rows x 64 bytes, row r at
// 64 r: unit (p, j, h) holds blocks j + 8h and j + 8h + 4 of pair p side by side, so one
// tile load takes a block's rows 64 bytes apart and the next lane in kLaneOrder finds the
// other half of the same lines in L1.
constexpr int64_t kUnitBytes = kRows * 64;
constexpr int64_t block_offset(int64_t p, int64_t l) { return ((p * 4 + l % 4) * 2 + l / 8) * kUnitBytes + 32 * (l / 4 % 2); }
constexpr int kLaneOrder[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

// A 4 x 4 transpose of 4-byte words inside each 128-bit lane of p[0..3].
SY_AMX __attribute__((always_inline)) inline void transpose4(const __m512i* p, __m512i* t) {
  const __m512i t0 = _mm512_unpacklo_epi32(p[0], p[1]), t1 = _mm512_unpackhi_epi32(p[0], p[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(p[2], p[3]), t3 = _mm512_unpackhi_epi32(p[2], p[3]);
  t[0] = _mm512_unpacklo_epi64(t0, t2);
  t[1] = _mm512_unpackhi_epi64(t0, t2);
  t[2] = _mm512_unpacklo_epi64(t1, t3);
  t[3] = _mm512_unpackhi_epi64(t1, t3);
}

// A row tile's weights as the tile multiply's first operand: per row, per group pair, its
// 16 blocks of 32 signed values in natural order (block l of pair p at block_offset(p, l)
// + 64 r); the scales as floats, dw[r * blocks + b]. Four 4-byte words of vector m (m = 0..3) of each block
// become contiguous by a 4 x 4 transpose inside 128-bit lanes (lane k of T[j]: block
// 4k + j), the nibbles turn into signed bytes by a table lookup (vpermb reads the low 6 bits
// of each index byte, so the high nibble needs no masking), and the low 16 values of each
// block are put beside its high 16.
template <DType T>
SY_AMX void unpack_rows(const uint8_t* w, size_t row_bytes, int64_t pairs, uint8_t* a, float* dw) {
  const int64_t pair_bytes = 2 * packed_group_bytes(T);
  const __m512i minus8 = _mm512_set1_epi8(-8);
  const __m512i nibble = _mm512_add_epi8(_mm512_and_si512(_mm512_set_epi8(
      63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35,
      34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
      3, 2, 1, 0), _mm512_set1_epi8(0x0f)), minus8);  // byte i: (i & 15) - 8
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i lanes_a = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), lanes_b = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);

  for (int64_t r = 0; r < kRows; ++r) {
    const uint8_t* row = w + r * static_cast<int64_t>(row_bytes);
    for (int64_t p = 0; p < pairs; ++p) {
      const uint8_t* pair = row + p * pair_bytes;
      _mm512_storeu_ps(dw + (r * pairs + p) * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair))));
      __m512i v[8], lo[4], hi[4];
      if constexpr (T == DType::Q4_0) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) v[m] = _mm512_loadu_si512(pair + 32 + 64 * m);
        transpose4(v, lo);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          hi[j] = _mm512_permutexvar_epi8(_mm512_srli_epi16(lo[j], 4), nibble);
          lo[j] = _mm512_permutexvar_epi8(lo[j], nibble);
        }
      } else {
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) v[m] = _mm512_xor_si512(_mm512_loadu_si512(pair + 32 + 64 * m), flip);  // unbiased
        transpose4(v, lo);
        transpose4(v + 4, hi);
      }
      uint8_t* out = a + p * 8 * kUnitBytes + 64 * r;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        _mm512_store_si512(out + 2 * j * kUnitBytes, _mm512_permutex2var_epi64(lo[j], lanes_a, hi[j]));
        _mm512_store_si512(out + (2 * j + 1) * kUnitBytes, _mm512_permutex2var_epi64(lo[j], lanes_b, hi[j]));
      }
    }
  }
}

// acc[r] = fma(float(C[r][n]), d_x[n] * d_w[r], acc[r]) for the 16 rows of a product tile.
SY_AMX __attribute__((always_inline)) inline void scale_add(const int32_t* c, const float* xd, const float* dw,
                                                            int64_t dw_stride, __m512 acc[kRows]) {
  const __m512 d = _mm512_loadu_ps(xd);
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(dw[r * dw_stride]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * r)), s, acc[r]);
  }
}

// Per-thread buffers: one row tile's unpacked weights and scales, a ring of products and
// the lanes' sums. They grow to the widest matrix once; nothing is allocated after that.
constexpr int kRing = 4;  // products stored and not yet scaled, at most
struct TileScratch {
  AlignedVector<uint8_t> a;
  AlignedVector<float> dw;
  alignas(64) int32_t c[kRing][kRows * kTokens];
  alignas(64) float lanes[16][kRows * kTokens];
};

// One block's product into one of four product tiles, each stored kStoreLag steps later,
// when its multiply is done (two product tiles measured the same).
#define SY_BLOCK_PRODUCT(C, A, B, a_tile, x_tile, a_stride) \
  do {                                                       \
    SY_TILE_LOAD(A, a_tile, a_stride);                       \
    SY_TILE_LOAD(B, x_tile, 64);                             \
    SY_TILE_ZERO(C);                                         \
    SY_TILE_DPBSSD(C, A, B);                                 \
  } while (0)

// A 16 x 16 transpose: v[i] lane j becomes v[j] lane i. Pairs of rows interleave, then
// quads (u[4q + j], 128-bit lane g: column 4g + j of rows 4q..4q + 3), then the 128-bit
// lanes of u[j], u[4 + j], u[8 + j], u[12 + j] transpose as a 4 x 4.
SY_AMX void transpose16(__m512 v[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int q = 0; q < 16; q += 4) {
    u[q] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[q]), _mm512_castps_pd(t[q + 2])));
    u[q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[q]), _mm512_castps_pd(t[q + 2])));
    u[q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[q + 1]), _mm512_castps_pd(t[q + 3])));
    u[q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[q + 1]), _mm512_castps_pd(t[q + 3])));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), s1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44), s3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    v[j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    v[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

// Rows [r, r + 16), unpacked into s, against every token of x (tile layout); results at
// y[t * ldy + r + i]. Blocks go lane by lane (block k: lane kLaneOrder[k / pairs], pair
// k % pairs); block k's product is stored two steps after its multiply and scaled two steps
// after that: a tile store's bytes reach the vector loads only once it has completed (read
// back at once, a block cost 44 ns against 33 ns now). The first token chunk prefetches the next
// tile's weights (next_bytes from `next`) into L2, spread over its blocks, so that their
// unpacking finds them there instead of waiting on memory.
SY_AMX void rows16(int64_t cols, int64_t r, const PackedActivations& x, float* y, int64_t ldy, TileScratch& s,
                   const uint8_t* next, int64_t next_bytes) {
  const int64_t pairs = cols / (2 * kGroupValues), blocks = 16 * pairs;
  const uint8_t* a = s.a.data();
  const float* dw = s.dw.data();
  const int64_t chunks = (x.rows() + kTokens - 1) / kTokens;
  // Block k is multiplied at step k, stored at k + kStoreLag and scaled at k + kAhead.
  constexpr int64_t kStoreLag = 2, kAhead = 4;
  for (int64_t c = 0; c < chunks; ++c) {
    const int8_t* xt = x.tile(c, 0);
    const float* xd = x.tile_d(c, 0);
    __m512 acc[kRows];
    // (l, p) of the block multiplied (k) and of the one scaled (k - kAhead), counted up.
    int64_t ml = 0, mp = 0, sl = 0, sp = 0;
    const int64_t lines = c == 0 && next ? (next_bytes + 63) / 64 : 0, per_block = (lines + blocks - 1) / blocks;
    const uint8_t* fetch = next;
    const uint8_t* fetch_end = next + 64 * lines;
    for (int64_t k = 0; k < blocks + kAhead; ++k) {
      if (k < blocks) {
        const int64_t l = kLaneOrder[ml];
        const uint8_t* at = a + block_offset(mp, l);
        const int8_t* bt = xt + PackedActivations::kTileBytes * (16 * mp + l);
        switch (k & 3) {
          case 0: SY_BLOCK_PRODUCT(0, 4, 5, at, bt, 64); break;
          case 1: SY_BLOCK_PRODUCT(1, 6, 7, at, bt, 64); break;
          case 2: SY_BLOCK_PRODUCT(2, 4, 5, at, bt, 64); break;
          default: SY_BLOCK_PRODUCT(3, 6, 7, at, bt, 64); break;
        }
        if (++mp == pairs) mp = 0, ++ml;
        for (int64_t i = 0; i < per_block && fetch < fetch_end; ++i, fetch += 64) _mm_prefetch(reinterpret_cast<const char*>(fetch), _MM_HINT_T1);
      }
      if (k >= kStoreLag && k < blocks + kStoreLag) {
        int32_t* out = s.c[(k - kStoreLag) % kRing];
        switch ((k - kStoreLag) & 3) {
          case 0: SY_TILE_STORE(0, out, 64); break;
          case 1: SY_TILE_STORE(1, out, 64); break;
          case 2: SY_TILE_STORE(2, out, 64); break;
          default: SY_TILE_STORE(3, out, 64); break;
        }
      }
      if (k >= kAhead) {
        const int64_t l = kLaneOrder[sl], b = 16 * sp + l;
        if (sp == 0) {
#pragma GCC unroll 16
          for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
        }
        scale_add(s.c[(k - kAhead) % kRing], xd + kTokens * b, dw + b, blocks, acc);
        if (sp == pairs - 1) {
#pragma GCC unroll 16
          for (int i = 0; i < kRows; ++i) _mm512_store_ps(s.lanes[l] + 16 * i, acc[i]);
        }
        if (++sp == pairs) sp = 0, ++sl;
      }
    }
    // The lanes' sums as _mm512_reduce_add_ps adds them: lanes l and l + 8, then l and
    // l + 4, then l and l + 2, then 0 and 1.
    const int64_t nt = std::min<int64_t>(kTokens, x.rows() - c * kTokens);
    __m512 z[kRows];
    for (int i = 0; i < kRows; ++i) {
      __m512 h[8];
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) h[l] = _mm512_add_ps(_mm512_load_ps(s.lanes[l] + 16 * i), _mm512_load_ps(s.lanes[l + 8] + 16 * i));
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) h[l] = _mm512_add_ps(h[l], h[l + 4]);
      z[i] = _mm512_add_ps(_mm512_add_ps(h[0], h[2]), _mm512_add_ps(h[1], h[3]));
    }
    transpose16(z);  // z[n]: token n's 16 rows
    for (int64_t n = 0; n < nt; ++n) _mm512_storeu_ps(y + (c * kTokens + n) * ldy + r, z[n]);
  }
}

const PackedKernels& vnni() { return *packed_kernels_avx512vnni(); }

// Rows [r0, r1) of one or two matrices: whole tiles of 16 rows here, the rest (and inputs
// without the tile layout) on the VNNI kernels.
template <DType T>
SY_AMX void kernel_two(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                       const PackedActivations& x, float* ya, float* yb, int64_t ldy) {
  const auto vnni_two = T == DType::Q4_0 ? vnni().q4_0_two : vnni().q8_0_two;
  const auto vnni_one = T == DType::Q4_0 ? vnni().q4_0 : vnni().q8_0;
  auto rest = [&](int64_t from, int64_t to) {
    if (from >= to) return;
    if (wb) vnni_two(wa, wb, row_bytes, cols, from, to, x, ya, yb, ldy);
    else vnni_one(wa, row_bytes, cols, from, to, x, ya, ldy);
  };
  const int64_t tiled_end = r0 + (r1 - r0) / kRows * kRows;
  if (!x.has_tiles() || tiled_end == r0) return rest(r0, r1);
  thread_local TileScratch s;
  const int64_t pairs = cols / (2 * kGroupValues);
  if (s.a.size() < static_cast<size_t>(kRows * cols)) s.a.resize(kRows * cols);
  if (s.dw.size() < static_cast<size_t>(kRows * 16 * pairs)) s.dw.resize(kRows * 16 * pairs);
  static const TileConfig config;
  _tile_loadconfig(&config);
  const int64_t tile_bytes = kRows * static_cast<int64_t>(row_bytes);
  for (int64_t r = r0; r < tiled_end; r += kRows) {
    for (int m = 0; m < (wb ? 2 : 1); ++m) {
      const uint8_t* w = (m == 0 ? wa : wb) + r * static_cast<int64_t>(row_bytes);
      // The next tile: b's rows after a's, else a's next rows.
      const uint8_t* next = m == 0 && wb              ? wb + r * static_cast<int64_t>(row_bytes)
                            : r + kRows < tiled_end ? wa + (r + kRows) * static_cast<int64_t>(row_bytes)
                                                    : nullptr;
      unpack_rows<T>(w, row_bytes, pairs, s.a.data(), s.dw.data());
      rows16(cols, r, x, m == 0 ? ya : yb, ldy, s, next, tile_bytes);
    }
  }
  _tile_release();  // the thread's next context switches save no tile state
  rest(tiled_end, r1);
}

template <DType T>
SY_AMX void kernel(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1, const PackedActivations& x,
                   float* y, int64_t ldy) {
  kernel_two<T>(w, nullptr, row_bytes, cols, r0, r1, x, y, nullptr, ldy);
}

// Linux hands out the tile state (8 KiB per thread) only to a process that asks for it.
bool tiles_granted() {
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

const PackedKernels* packed_kernels_amx() {
  static const PackedKernels* table = []() -> const PackedKernels* {
    const PackedKernels* v = packed_kernels_avx512vnni();
    if (!v || !cpu_has_amx_int8_vbmi() || !tiles_granted()) {
      return nullptr;
    }
    static const PackedKernels k{"amx",           kernel<DType::Q4_0>, kernel<DType::Q8_0>,
                                 kernel_two<DType::Q4_0>, kernel_two<DType::Q8_0>, v->quantize_group,
                                 v->pack_pairs,   kTileTokens, v->interleaved};
    return &k;
  }();
  return table;
}

}  // namespace sy::cpu

#else
namespace sy::cpu {
const PackedKernels* packed_kernels_amx() { return nullptr; }
}  // namespace sy::cpu
#endif
