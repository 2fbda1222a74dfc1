// Dot products of weight rows and activation rows, per weight type, with runtime CPU
// dispatch: float weights a tile of rows and tokens at a time, quantized weights a row at
// a time (the packed Q4_0/Q8_0 kernels are in packed.h). F32 and F16 weights take float
// activations, for F16 weights rounded to F16 values first; BF16 weights take activations
// rounded to BF16 (a product of two F16 or two BF16 values is exact in f32, so every ISA,
// vdpbf16ps included, forms the same products as llama.cpp, whose CPU backend rounds them
// the same way);
// quantized weights take activations quantized to Q8_0 (integer dot products inside each
// 32-value block, scaled once per block). The activation types are llama.cpp's.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace sy::cpu {

// Float weights go a tile at a time: W rows r < nr <= kFloatTile (w_ld values apart)
// against token rows t < nt <= kFloatTile of x (x_ld apart),
//   out[t * ld + r] = dot(W row r, x row t)   over n values,
// so that a register-tiled kernel loads each weight vector once for several tokens and
// each activation vector once for several rows. Every (row, token) sum is formed the same
// way whatever nr and nt are: a token's result does not depend on the batch around it.
// `cold`: the first tile over these rows, which reads them from memory (the kernel may
// prefetch the rows that follow).
constexpr int kFloatTile = 4;
template <class W, class X>
using FloatTile = void (*)(const W* w, int64_t w_ld, int nr, const X* x, int64_t x_ld, int nt, int64_t n, float* out,
                           int64_t ld, bool cold);

// A tile as one row dot per (row, token): the tables without register tiles.
template <class W, class X, float (*Dot)(const W*, const X*, int64_t)>
void tile_of_dots(const W* w, int64_t w_ld, int nr, const X* x, int64_t x_ld, int nt, int64_t n, float* out,
                  int64_t ld, bool /*cold*/) {
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < nr; ++r) out[t * ld + r] = Dot(w + r * w_ld, x + t * x_ld, n);
  }
}

// The heads one attention tile call covers (DotKernels::dot_tile, axpy_tile): `n` query
// heads, `group` of them to a KV head, their scores `scores_ld` apart.
struct TileHeads {
  int n = 1;
  int group = 1;
  int64_t scores_ld = 0;
};

struct DotKernels {
  const char* isa;
  FloatTile<float, float> f32;
  FloatTile<uint16_t, float> f16;          // F16 weights
  FloatTile<uint16_t, uint16_t> bf16;      // BF16 weights and activations
  float (*q8_0)(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
  float (*q4_0)(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y += a * x
  // One cached position of a q8_0 KV cache (d a multiple of 32) against a decode row's nh
  // query heads, head h reading KV head h / group of the row, the values dequantized inside
  // the dot and the axpy (attention walks the cache position by position, so each cached
  // row is read once, as one contiguous stream, for all heads; f32 and f16 caches go
  // through the tiles below):
  //   dot:  out[h * out_stride] = scale * dot(q + h * d, row + (h / group) * d)   over d values
  //   axpy: out[h * d + i] += w[h * w_stride] * row[(h / group) * d + i]   for h < nh, i < d
  void (*dot_heads_q8)(const float* q, const BlockQ8_0* row, int nh, int group, int64_t d, float scale, float* out,
                       int64_t out_stride);
  void (*axpy_heads_q8)(const float* w, int64_t w_stride, const BlockQ8_0* row, int nh, int group, int64_t d,
                        float* out);
  // Tiles for the query rows of one sequence (a prompt's block, or a decode row) over up to
  // 4 cached positions, head after head inside one call (a call per head cost the decode
  // walk a third of its time: BM_AttentionDecodeBatch with 8 heads of 256 against 16 of 128
  // ran 1.35-1.9x faster from L2): each key or value row is loaded once per 2 query rows
  // instead of once per row, and a score costs a share of one horizontal sum per 8 scores
  // instead of one each. For head h < heads.n, reading KV head h / heads.group (d values
  // per head in q, in the cached rows and in out of axpy_tile):
  //   dot_tile:  out[h * s + i * ld + j] = scale * dot(q + i * q_ld + h * d, k[j] + (h / group) * d)
  //   axpy_tile: out[i * out_ld + h * d + x] += sum over j of w[h * s + i * ld + j] * v[j][(h / group) * d + x]
  // for i < nq query rows, j < nk <= 4 cached positions and x < d, s = heads.scores_ld.
  void (*dot_tile)(const float* q, int64_t q_ld, int64_t nq, const float* const* k, int nk, int64_t d, float scale,
                   float* out, int64_t ld, TileHeads heads);
  void (*axpy_tile)(const float* w, int64_t ld, int64_t nq, const float* const* v, int nk, int64_t d, float* out,
                    int64_t out_ld, TileHeads heads);
  void (*dot_tile_f16)(const float* q, int64_t q_ld, int64_t nq, const uint16_t* const* k, int nk, int64_t d,
                       float scale, float* out, int64_t ld, TileHeads heads);
  void (*axpy_tile_f16)(const float* w, int64_t ld, int64_t nq, const uint16_t* const* v, int nk, int64_t d,
                        float* out, int64_t out_ld, TileHeads heads);
  // x[i] = exp(x[i] - max) for max = the largest of n >= 1 values, which goes to *max;
  // returns the sum (attention's softmax, normalized or merged by the caller). The vector
  // forms evaluate exp as a polynomial; the router keeps ops.h's libm softmax, whose exact
  // values pick the top-k experts.
  float (*exp_minus_max)(float* x, int64_t n, float* max);
  // gate[i] = silu(gate[i]) * up[i]
  void (*swiglu)(float* gate, const float* up, int64_t n);
  // The sum of x[i]^2 in double (RMSNorm's, like ggml's; the vector forms sum in another
  // order).
  double (*sum_squares)(const float* x, int64_t n);
  // y[i] = x[i] as f16, rounded to nearest even (rows stored into an f16 KV cache).
  void (*to_f16)(const float* x, uint16_t* y, int64_t n);
  // y[i] = x[i] rounded to the nearest f16 value, kept as a float (activations for F16
  // weights: the float tiles then form f16 x f16 products, exact in f32, with no
  // conversion in their inner loops).
  void (*round_f16)(const float* x, float* y, int64_t n);
  // y[i] = x[i] as BF16, rounded to nearest even, NaN kept quiet: f32_to_bf16's bits
  // (activations for BF16 weights).
  void (*to_bf16)(const float* x, uint16_t* y, int64_t n);
  // n values (a multiple of 32) of q8_0 blocks as floats (prompt rows over a q8_0 cache).
  void (*q8_to_f32)(const BlockQ8_0* x, float* y, int64_t n);
};

// Best kernels for this CPU, chosen once; SY_ISA=scalar in the environment forces the
// portable reference kernels (here and for the packed kernels), SY_ISA=avx2 keeps both
// at AVX2 (A/B runs against the AVX-512 ones, and what an AVX2-only CPU runs).
const DotKernels& dot_kernels();
const DotKernels& dot_kernels_scalar();
// nullptr when the CPU lacks AVX2/FMA/F16C.
const DotKernels* dot_kernels_avx2();
// The AVX2 table with the float-weight dots on AVX-512 (BF16 on AVX-512 BF16 where
// present); nullptr when the CPU lacks AVX-512 F/BW/VL or AVX2.
const DotKernels* dot_kernels_avx512();
// True when SY_ISA=scalar asks for the portable kernels everywhere.
bool isa_forced_scalar();
// True when SY_ISA=avx2 asks for the AVX2 kernels where AVX-512 ones exist.
bool isa_forced_avx2();
// True when SY_ISA=avx512 asks for the AVX-512 kernels where AMX tile ones exist.
bool isa_forced_avx512();

// True when weights of this type take Q8_0 activations.
inline bool takes_q8_activations(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }
// True when weights of this type take BF16 activations.
inline bool takes_bf16_activations(DType t) { return t == DType::BF16; }

}  // namespace sy::cpu
