// The 16-row tile layout ("tiles16") of Q4_0 weights, read by AVX-512 VNNI and AMX kernels
// that give every token the same bits whatever the batch.
//
// A matrix of R rows (R a multiple of 16) is R / 16 tiles of 16 consecutive rows. Within a
// tile, every block b of 32 values (in column order) has 288 bytes, the same bytes as the
// 16 rows' GGUF blocks:
//   32 bytes   the 16 rows' f16 scales, row n at 2n
//   4 x 64     "lines": byte 4n + j of line k holds value 4k + j of row n in its low
//              nibble and value 16 + 4k + j in its high nibble (unsigned, value = nibble - 8)
// So the low nibbles of line k are the k-th 4-value slice of every row's block side by side
// (row n in 32-bit lane n): for VNNI, one vpdpbusd of that vector against a token's 4
// values broadcast adds to all 16 rows' dot products at once; for AMX they are row k of the
// tile multiply's second operand (K = 32, N = 16 rows) as they stand, with the tokens as the
// rows of the first operand. Either way no row's bytes are transposed or looked up again
// when a tile is computed (the packed layout's AMX kernel spends ~40% of its time on that).
// Blocks 2p and 2p + 1 are stored as a pair: both blocks' scales, then 2p's lines, then
// 2p + 1's (tiles16_block), so that every line starts on a cache line; an odd last block
// has its scales, then its lines.
//
// Every token's result for row n is, over blocks b in order,
//   acc = fma(float(sum_j u_j x_j - 8 sum_j x_j), d_w[n][b] * d_x[b], acc)
// with the exact integer dot products, so the VNNI kernels and the AMX kernels (and the
// scalar reference) agree bit for bit, and a token's results do not depend on its batch.
#pragma once

#include <cstdint>

#include "base/aligned_vector.h"
#include "base/dtype.h"

namespace sy::cpu {

constexpr int64_t kTileRows16 = 16;
constexpr int64_t kTiles16BlockBytes = 32 + 4 * 64;  // 288: 16 rows x 18 bytes

// Where block b of a tile of `blocks` blocks keeps its scales and its first line (bytes
// from the tile's start). 288-byte blocks one after another would leave every other
// block's 64-byte loads straddling two cache lines (batch-1 decode measured the same
// either way, forty-ninth session; the pairs cost nothing).
struct Tiles16Block {
  int64_t scales, lines;
};
__attribute__((always_inline)) inline Tiles16Block tiles16_block(int64_t b, int64_t blocks) {
  const int64_t pair = (b / 2) * 2 * kTiles16BlockBytes;
  if (b + 1 == blocks && blocks % 2 == 1) return {pair, pair + 32};
  return {pair + 32 * (b % 2), pair + 64 + 256 * (b % 2)};
}

// A tile kernel's first pass over a tile streams it from memory in order. Once it has read
// up to some byte it prefetches, one prefetch a line, up to kTiles16NearBytes on into L1
// and kTiles16FarBytes on into L2 (past the tile and its task too: a prefetch cannot
// fault). Batch-1 decode of olmoe Q4_0, the attention and output matmuls (alternating runs,
// a fast-memory minute): 3.38-3.87 / 3.29-3.57 ms a step against 3.36-3.70 / 3.09-3.56 for
// the packed layout, and with only the L1 prefetch, 2 KiB on, 3.67-3.90 / 3.46-3.61
// (forty-ninth session; without any, `BM_MatmulTiles16/2/1/2` streamed 302 MB at 20
// against 26-29 GB/s).
constexpr int64_t kTiles16NearBytes = 1024, kTiles16FarBytes = 16384;
struct Tiles16Prefetch {
  const uint8_t* near;
  const uint8_t* far;
  explicit Tiles16Prefetch(const uint8_t* tile) : near(tile + kTiles16NearBytes), far(tile + kTiles16FarBytes) {}
  __attribute__((always_inline)) void after(const uint8_t* read_to) {
    for (; near < read_to + kTiles16NearBytes; near += 64) __builtin_prefetch(near, 0, 3);
    for (; far < read_to + kTiles16FarBytes; far += 64) __builtin_prefetch(far, 0, 2);
  }
};

// Whether a matrix of this type and shape has the layout: Q4_0, whole tiles of rows.
inline bool tiles16_shape(DType t, int64_t rows, int64_t cols) {
  return t == DType::Q4_0 && rows > 0 && rows % kTileRows16 == 0 && cols > 0 && cols % kQBlock == 0;
}

// Token rows quantized to Q8_0 as the tile kernels read them: each token's int8 quants in
// column order (a row of `cols` bytes), and per block its scale (rounded through f16, as
// llama.cpp's) and 8 x the sum of its quants (the weights' nibble offset).
class Tiles16Activations {
 public:
  // With the dispatched kernels' quantizer (tiles16_kernels(), else the scalar one).
  void quantize(const float* x, int64_t n, int64_t ld, int64_t cols);
  int64_t rows() const { return n_; }
  int64_t cols() const { return cols_; }
  const int8_t* q(int64_t t) const { return q_.data() + t * cols_; }
  const float* d(int64_t t) const { return d_.data() + t * blocks_; }
  const int32_t* offset(int64_t t) const { return offset_.data() + t * blocks_; }

 private:
  int64_t n_ = 0, cols_ = 0, blocks_ = 0;
  AlignedVector<int8_t> q_;
  AlignedVector<float> d_;
  AlignedVector<int32_t> offset_;
};

// Tiles [tile0, tile1) of the matrix at w (`cols` values a row) against activation rows
// [t0, t1) of x: y[t * ldy + 16 g + n] for row n of tile g.
using Tiles16Kernel = void (*)(const uint8_t* w, int64_t cols, int64_t tile0, int64_t tile1,
                               const Tiles16Activations& x, int64_t t0, int64_t t1, float* y, int64_t ldy);
struct Tiles16Kernels {
  const char* isa;
  Tiles16Kernel q4_0;
  // One token row of `cols` floats to its quants, scales and offsets (Tiles16Activations),
  // the same bits on every table.
  void (*quantize_row)(const float* x, int64_t cols, int8_t* q, float* d, int32_t* offset);
};

// The scalar reference, the AVX-512 VNNI kernels and the AMX ones (nullptr where this CPU
// or the OS lacks them).
const Tiles16Kernels& tiles16_kernels_scalar();
const Tiles16Kernels* tiles16_kernels_avx512vnni();
const Tiles16Kernels* tiles16_kernels_amx();
// The kernels matmuls run: AMX, else AVX-512 VNNI, following the packed kernels' choice
// (SY_ISA). nullptr where the packed kernels are not AVX-512's: matrices then keep the
// packed layout.
const Tiles16Kernels* tiles16_kernels();

// Rows of one tile, from GGUF blocks (src_rows[n] -> row n; `cols` values each) to the
// layout at dst (blocks x 288 bytes).
void pack_tile16(const BlockQ4_0* const* src_rows, int64_t cols, uint8_t* dst);
// Row r of a tiles16 matrix back to GGUF blocks / to floats.
void tiles16_row_blocks(const uint8_t* w, int64_t cols, int64_t r, BlockQ4_0* out);
void dequantize_tiles16_row(const uint8_t* w, int64_t cols, int64_t r, float* out);

}  // namespace sy::cpu
