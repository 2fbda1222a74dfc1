#include "kernels/cpu/tiles16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"

namespace sy::cpu {
namespace {

// Where value j of row n's block sits among the block's lines: the byte, and the nibble.
struct NibbleAt {
  int64_t byte;
  int shift;
};
NibbleAt nibble_at(int64_t n, int j) { return {64 * ((j % 16) / 4) + 4 * n + j % 4, j < 16 ? 0 : 4}; }

float tile_scale(const uint8_t* scales, int64_t n) {
  uint16_t h;
  std::memcpy(&h, scales + 2 * n, 2);
  return f16_to_f32(h);
}

// The reference: the float steps of the vector kernels (tiles16.h) one (row, token) at a time.
void scalar_q4_0(const uint8_t* w, int64_t cols, int64_t tile0, int64_t tile1, const Tiles16Activations& x,
                 int64_t t0, int64_t t1, float* y, int64_t ldy) {
  const int64_t blocks = cols / kQBlock;
  for (int64_t g = tile0; g < tile1; ++g) {
    const uint8_t* tile = w + g * blocks * kTiles16BlockBytes;
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t n = 0; n < kTileRows16; ++n) {
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const Tiles16Block at_b = tiles16_block(b, blocks);
          const uint8_t* lines = tile + at_b.lines;
          const int8_t* xq = x.q(t) + b * kQBlock;
          int32_t s = 0;
          for (int j = 0; j < kQBlock; ++j) {
            const NibbleAt at = nibble_at(n, j);
            s += ((lines[at.byte] >> at.shift) & 0x0f) * xq[j];
          }
          const float dd = tile_scale(tile + at_b.scales, n) * x.d(t)[b];
          acc = std::fma(static_cast<float>(s - x.offset(t)[b]), dd, acc);
        }
        y[t * ldy + g * kTileRows16 + n] = acc;
      }
    }
  }
}

void quantize_row_scalar(const float* x, int64_t cols, int8_t* q, float* d, int32_t* offset) {
  BlockQ8_0 blocks[kGroupBlocks];
  const int64_t n_blocks = cols / kQBlock;
  for (int64_t b0 = 0; b0 < n_blocks; b0 += kGroupBlocks) {
    const int64_t nb = std::min<int64_t>(kGroupBlocks, n_blocks - b0);
    quantize_row_q8_0(x + b0 * kQBlock, blocks, nb * kQBlock);
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t b = b0 + i;
      std::memcpy(q + b * kQBlock, blocks[i].q, kQBlock);
      int32_t sum = 0;
      for (int j = 0; j < kQBlock; ++j) sum += blocks[i].q[j];
      d[b] = f16_to_f32(blocks[i].d);  // the rounding llama.cpp's scales get
      offset[b] = 8 * sum;
    }
  }
}

}  // namespace

void Tiles16Activations::quantize(const float* x, int64_t n, int64_t ld, int64_t cols) {
  n_ = n;
  cols_ = cols;
  blocks_ = cols / kQBlock;
  if (q_.size() < static_cast<size_t>(n * cols)) q_.resize(n * cols);
  if (d_.size() < static_cast<size_t>(n * blocks_)) {
    d_.resize(n * blocks_);
    offset_.resize(n * blocks_);
  }
  const Tiles16Kernels* k = tiles16_kernels();
  const auto quantize_row = (k ? *k : tiles16_kernels_scalar()).quantize_row;
  for (int64_t t = 0; t < n; ++t) {
    quantize_row(x + t * ld, cols, q_.data() + t * cols, d_.data() + t * blocks_,
                 offset_.data() + t * blocks_);
  }
}

void pack_tile16(const BlockQ4_0* const* src_rows, int64_t cols, uint8_t* dst) {
  const int64_t blocks = cols / kQBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const Tiles16Block at = tiles16_block(b, blocks);
    for (int64_t n = 0; n < kTileRows16; ++n) {
      const BlockQ4_0& src = src_rows[n][b];
      std::memcpy(dst + at.scales + 2 * n, &src.d, 2);
      // GGUF: byte i holds value i (low nibble) and value 16 + i (high): line (i / 4),
      // byte 4n + i % 4 takes the whole byte.
      for (int i = 0; i < kQBlock / 2; ++i) dst[at.lines + 64 * (i / 4) + 4 * n + i % 4] = src.q[i];
    }
  }
}

namespace {
// Block b of row r's GGUF form.
BlockQ4_0 row_block(const uint8_t* w, int64_t blocks, int64_t r, int64_t b) {
  const int64_t n = r % kTileRows16;
  const uint8_t* tile = w + (r / kTileRows16) * blocks * kTiles16BlockBytes;
  const Tiles16Block at = tiles16_block(b, blocks);
  BlockQ4_0 out;
  std::memcpy(&out.d, tile + at.scales + 2 * n, 2);
  for (int i = 0; i < kQBlock / 2; ++i) out.q[i] = tile[at.lines + 64 * (i / 4) + 4 * n + i % 4];
  return out;
}
}  // namespace

void tiles16_row_blocks(const uint8_t* w, int64_t cols, int64_t r, BlockQ4_0* out) {
  const int64_t blocks = cols / kQBlock;
  for (int64_t b = 0; b < blocks; ++b) out[b] = row_block(w, blocks, r, b);
}

// A block at a time: the embedding lookups of a tied output head call it every token.
void dequantize_tiles16_row(const uint8_t* w, int64_t cols, int64_t r, float* out) {
  const int64_t blocks = cols / kQBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const BlockQ4_0 blk = row_block(w, blocks, r, b);
    dequantize_row(DType::Q4_0, &blk, out + b * kQBlock, kQBlock);
  }
}

const Tiles16Kernels& tiles16_kernels_scalar() {
  static const Tiles16Kernels k{"scalar", scalar_q4_0, quantize_row_scalar};
  return k;
}

const Tiles16Kernels* tiles16_kernels() {
  static const Tiles16Kernels* chosen = []() -> const Tiles16Kernels* {
    const PackedKernels* packed = &packed_kernels();
    if (packed == packed_kernels_amx()) return tiles16_kernels_amx();
    if (packed == packed_kernels_avx512vnni()) return tiles16_kernels_avx512vnni();
    return nullptr;
  }();
  return chosen;
}

}  // namespace sy::cpu
