#include "kernels/cpu/packed.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/quantize.h"

namespace sy::cpu {
namespace {

// Word m of every block's quants into vector m: a transpose of 8 blocks x 4 (Q4_0) or
// 8 (Q8_0) 4-byte words, done word by word (loads and stores the compiler keeps in
// registers; the tiered expert store packs every expert it reads this way). Scales go to
// `scales`, vector m to q + m * stride.
template <int Words, uint32_t Flip, class Block>
void pack_group(const Block* b, uint8_t* scales, uint8_t* q, int64_t stride) {
  uint32_t w[kGroupBlocks][Words];
  for (int i = 0; i < kGroupBlocks; ++i) {
    std::memcpy(scales + 2 * i, &b[i].d, 2);
    std::memcpy(w[i], b[i].q, sizeof w[i]);
  }
  for (int m = 0; m < Words; ++m) {
    uint32_t out[kGroupBlocks];
    for (int i = 0; i < kGroupBlocks; ++i) out[i] = w[i][m] ^ Flip;
    std::memcpy(q + m * stride, out, sizeof out);
  }
}

// Group g of a row, its 8 GGUF blocks at `blocks`, to its place in the packed row `dst`.
void pack_group_to(DType t, const uint8_t* blocks, uint8_t* dst, int64_t groups, int64_t g) {
  const PackedGroupIn<uint8_t> pg = packed_group(t, dst, groups, g);
  // Q8_0 quants biased to unsigned: x ^ 0x80 is x + 128 for int8 x.
  if (t == DType::Q4_0) pack_group<4, 0u>(reinterpret_cast<const BlockQ4_0*>(blocks), pg.scales, pg.q, pg.stride);
  else pack_group<8, 0x80808080u>(reinterpret_cast<const BlockQ8_0*>(blocks), pg.scales, pg.q, pg.stride);
}

// Value j (0..31) of block i in a packed group, as the integer quant (signed).
int quant_q4_0(const PackedGroup& g, int i, int j) {
  const uint8_t q = g.vector((j % 16) / 4)[4 * i + j % 4];
  return (j < 16 ? (q & 0x0f) : (q >> 4)) - 8;
}
int quant_q8_0(const PackedGroup& g, int i, int j) {
  return static_cast<int>(g.vector(j / 4)[4 * i + j % 4]) - 128;  // undo the bias
}
int quant(DType t, const PackedGroup& g, int i, int j) { return t == DType::Q4_0 ? quant_q4_0(g, i, j) : quant_q8_0(g, i, j); }
float scale(const PackedGroup& g, int i) {
  uint16_t h;
  std::memcpy(&h, g.scales + 2 * i, 2);
  return f16_to_f32(h);
}

template <DType T>
void scalar_kernel(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                   const PackedActivations& x, float* y, int64_t ldy) {
  const int64_t groups = packed_groups(cols);
  const int64_t tail = cols / kQBlock - groups * kGroupBlocks;
  const DotKernels& k = dot_kernels_scalar();
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    for (int64_t t = 0; t < x.rows(); ++t) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const PackedGroup grp = packed_group(T, row, groups, g);
        const int8_t* xq = x.group(t, g);
        for (int i = 0; i < kGroupBlocks; ++i) {
          int32_t s = 0;
          for (int j = 0; j < kQBlock; ++j) s += quant(T, grp, i, j) * xq[64 * (j / 4) + 4 * i + j % 4];
          acc += scale(grp, i) * x.d(t)[g * kGroupBlocks + i] * static_cast<float>(s);
        }
      }
      if (tail > 0) {
        const uint8_t* tw = row + groups * packed_group_bytes(T);
        acc += T == DType::Q4_0 ? k.q4_0(reinterpret_cast<const BlockQ4_0*>(tw), x.tail(t), tail * kQBlock)
                                : k.q8_0(reinterpret_cast<const BlockQ8_0*>(tw), x.tail(t), tail * kQBlock);
      }
      y[t * ldy + r] = acc;
    }
  }
}

template <DType T>
void scalar_kernel_two(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                       const PackedActivations& x, float* ya, float* yb, int64_t ldy) {
  scalar_kernel<T>(wa, row_bytes, cols, r0, r1, x, ya, ldy);
  scalar_kernel<T>(wb, row_bytes, cols, r0, r1, x, yb, ldy);
}

void quantize_group_scalar(const float* x, int8_t* q, float* d, int32_t* s) {
  BlockQ8_0 blocks[kGroupBlocks];
  quantize_row_q8_0(x, blocks, kGroupValues);
  for (int m = 0; m < 8; ++m)
    for (int i = 0; i < kGroupBlocks; ++i) std::memcpy(q + 64 * m + 4 * i, blocks[i].q + 4 * m, 4);
  for (int i = 0; i < kGroupBlocks; ++i) {
    int32_t sum = 0;
    for (int j = 0; j < kQBlock; ++j) sum += blocks[i].q[j];
    d[i] = f16_to_f32(blocks[i].d);  // the rounding llama.cpp's scales get
    s[i] = sum;
  }
}

// A group pair is a whole number of pairs of the row, so packing it as a two-group row
// gives its place in the row; src may be dst, hence the copy.
void pack_pairs_scalar(DType t, const uint8_t* src, uint8_t* dst, int64_t pairs) {
  const size_t gb = static_cast<size_t>(packed_group_bytes(t));
  uint8_t tmp[2 * 272];
  for (int64_t p = 0; p < pairs; ++p) {
    std::memcpy(tmp, src + 2 * p * gb, 2 * gb);
    for (int64_t k = 0; k < 2; ++k) pack_group_to(t, tmp + k * gb, dst + 2 * p * gb, 2, k);
  }
}

}  // namespace

void pack_row(DType t, const void* src, void* dst, int64_t n_values) {
  if (!packable(t)) throw Error("pack_row: " + dtype_name(t) + " has no packed layout");
  const int64_t groups = packed_groups(n_values);
  const size_t row = dtype_row_bytes(t, n_values);
  const size_t gb = static_cast<size_t>(packed_group_bytes(t));
  auto* out = static_cast<uint8_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  packed_kernels().pack_pairs(t, in, out, groups / 2);
  if (groups % 2 == 1) {  // the odd last group, stored alone; src may be dst, hence the copy
    uint8_t tmp[272];
    std::memcpy(tmp, in + (groups - 1) * gb, gb);
    pack_group_to(t, tmp, out, groups, groups - 1);
  }
  if (out != in) std::memcpy(out + groups * gb, in + groups * gb, row - groups * gb);
}

void unpack_row(DType t, const void* src, void* dst, int64_t n_values) {
  if (!packable(t)) throw Error("unpack_row: " + dtype_name(t) + " has no packed layout");
  const int64_t groups = packed_groups(n_values);
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t block_bytes = t == DType::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const int words = t == DType::Q4_0 ? 4 : 8;
  const uint32_t flip = t == DType::Q4_0 ? 0u : 0x80808080u;  // undo Q8_0's bias
  for (int64_t g = 0; g < groups; ++g) {
    const PackedGroup grp = packed_group(t, in, groups, g);
    for (int i = 0; i < kGroupBlocks; ++i) {
      uint8_t* blk = out + (g * kGroupBlocks + i) * block_bytes;
      std::memcpy(blk, grp.scales + 2 * i, 2);
      for (int m = 0; m < words; ++m) {
        uint32_t word;
        std::memcpy(&word, grp.vector(m) + 4 * i, 4);
        word ^= flip;
        std::memcpy(blk + 2 + 4 * m, &word, 4);
      }
    }
  }
  const size_t done = static_cast<size_t>(groups * packed_group_bytes(t));
  std::memcpy(out + done, in + done, dtype_row_bytes(t, n_values) - done);
}

void dequantize_packed_row(DType t, const void* src, float* dst, int64_t n_values) {
  const int64_t groups = packed_groups(n_values);
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t g = 0; g < groups; ++g) {
    const PackedGroup grp = packed_group(t, in, groups, g);
    for (int i = 0; i < kGroupBlocks; ++i) {
      const float d = scale(grp, i);
      for (int j = 0; j < kQBlock; ++j) dst[(g * kGroupBlocks + i) * kQBlock + j] = d * static_cast<float>(quant(t, grp, i, j));
    }
  }
  const int64_t done = groups * kGroupValues;
  dequantize_row(t, in + groups * packed_group_bytes(t), dst + done, n_values - done);
}

void PackedActivations::quantize(const float* x, int64_t n, int64_t ld, int64_t cols) {
  n_ = n;
  cols_ = cols;
  groups_ = packed_groups(cols);
  tail_blocks_ = cols / kQBlock - groups_ * kGroupBlocks;
  q_stride_ = (groups_ + 1) / 2 * 2 * kGroupValues;
  if (q_.size() < static_cast<size_t>(n * q_stride_)) q_.resize(n * q_stride_);
  if (d_.size() < static_cast<size_t>(n * groups_ * kGroupBlocks)) {
    d_.resize(n * groups_ * kGroupBlocks);
    s_.resize(n * groups_ * kGroupBlocks);
  }
  if (tail_.size() < static_cast<size_t>(n * tail_blocks_)) tail_.resize(n * tail_blocks_);
  const auto quantize_group = packed_kernels().quantize_group;
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * ld;
    for (int64_t g = 0; g < groups_; ++g) {
      quantize_group(xr + g * kGroupValues, q_.data() + t * q_stride_ + group_offset(g),
                     d_.data() + (t * groups_ + g) * kGroupBlocks, s_.data() + (t * groups_ + g) * kGroupBlocks);
    }
    if (tail_blocks_ > 0) quantize_row_q8_0(xr + groups_ * kGroupValues, tail_.data() + t * tail_blocks_, tail_blocks_ * kQBlock);
  }
  const int64_t tile_tokens = packed_kernels().tile_tokens;
  tiled_ = tile_tokens > 0 && n >= tile_tokens && groups_ % 2 == 0 && tail_blocks_ == 0;
  if (tiled_) build_tiles();
}

// Word m of block b of token 16c + n goes to word n of row m of tile (c, b): a transpose of
// tokens and blocks, a few microseconds at 16 tokens of 2048 columns.
void PackedActivations::build_tiles() {
  blocks_ = groups_ * kGroupBlocks;
  const int64_t chunks = (n_ + kTileRows - 1) / kTileRows;
  const size_t words = static_cast<size_t>(chunks * blocks_ * kTileBytes);
  if (tiles_.size() < words) tiles_.resize(words);
  if (tile_d_.size() < static_cast<size_t>(chunks * blocks_ * kTileRows)) tile_d_.resize(chunks * blocks_ * kTileRows);
  // The last chunk's missing tokens are zero.
  if (n_ % kTileRows != 0) {
    std::memset(tiles_.data() + (chunks - 1) * blocks_ * kTileBytes, 0, blocks_ * kTileBytes);
    std::memset(tile_d_.data() + (chunks - 1) * blocks_ * kTileRows, 0, blocks_ * kTileRows * sizeof(float));
  }
  for (int64_t t = 0; t < n_; ++t) {
    const int64_t c = t / kTileRows, n = t % kTileRows;
    for (int64_t b = 0; b < blocks_; ++b) {
      // Block b is lane b % 16 of its group pair's vectors.
      const int8_t* src = group(t, (b / kGroupBlocks) & ~int64_t{1}) + 4 * (b % 16);
      int8_t* dst = tiles_.data() + (c * blocks_ + b) * kTileBytes + 4 * n;
      for (int m = 0; m < 8; ++m) std::memcpy(dst + 64 * m, src + 64 * m, 4);
      tile_d_[(c * blocks_ + b) * kTileRows + n] = d(t)[b];
    }
  }
}

bool small_tiles_prefetch() {
  static const bool on = !(cpu_is_amd() && cpu_family() == 25);  // asked by every tile
  return on;
}

const PackedKernels& packed_kernels_scalar() {
  static const PackedKernels k{"scalar",
                               scalar_kernel<DType::Q4_0>,
                               scalar_kernel<DType::Q8_0>,
                               scalar_kernel_two<DType::Q4_0>,
                               scalar_kernel_two<DType::Q8_0>,
                               quantize_group_scalar,
                               pack_pairs_scalar};
  return k;
}

const PackedKernels& packed_kernels() {
  static const PackedKernels& chosen = []() -> const PackedKernels& {
    if (isa_forced_scalar()) return packed_kernels_scalar();
    if (!isa_forced_avx2()) {
      if (!isa_forced_avx512()) {
        if (const PackedKernels* k = packed_kernels_amx()) return *k;
      }
      if (const PackedKernels* k = packed_kernels_avx512vnni()) return *k;
    }
    if (const PackedKernels* k = packed_kernels_avx2()) return *k;
    return packed_kernels_scalar();
  }();
  return chosen;
}

std::vector<const PackedKernels*> packed_kernels_all() {
  std::vector<const PackedKernels*> all{&packed_kernels_scalar()};
  for (const PackedKernels* k : {packed_kernels_avx2(), packed_kernels_avx512vnni(), packed_kernels_amx()})
    if (k) all.push_back(k);
  return all;
}

}  // namespace sy::cpu
