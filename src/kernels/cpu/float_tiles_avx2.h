// Register-tiled float-weight dots on AVX2 (the FloatTile entries of the AVX2 table in
// dot.h): F32 and F16 weights against float activations, BF16 against BF16.
#pragma once

#include <cstdint>

namespace sy::cpu {

void f32_tile_avx2(const float* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int nt, int64_t n, float* out,
                   int64_t ld, bool cold);
void f16_tile_avx2(const uint16_t* w, int64_t w_ld, int nr, const float* x, int64_t x_ld, int nt, int64_t n,
                   float* out, int64_t ld, bool cold);
void bf16_tile_avx2(const uint16_t* w, int64_t w_ld, int nr, const uint16_t* x, int64_t x_ld, int nt, int64_t n,
                    float* out, int64_t ld, bool cold);

}  // namespace sy::cpu
