// Tensor element types as GGUF numbers them, with their block layouts.
// Quantized types store blocks of 32 values: Q8_0 = {f16 d; int8 q[32]} (x = d*q),
// Q4_0 = {f16 d; uint8 q[16]} with value j in the low nibble of q[j] and value j+16 in
// the high nibble (x = d*(nibble-8)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace sy {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
};

constexpr int kQBlock = 32;  // values per Q8_0 / Q4_0 block

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t q[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t q[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// True for the GGUF type numbers this engine can compute with.
bool is_supported_dtype(uint32_t ggml_type);
// Name as llama.cpp prints it ("F32", "Q4_0", ...); "type<N>" for unknown numbers.
std::string dtype_name(uint32_t ggml_type);
std::string dtype_name(DType t);
// Parses "f32", "F16", "q8_0", ... (case-insensitive); throws sy::Error otherwise.
DType parse_dtype(const std::string& name);
// Values per block (1 for float types) and bytes per block.
int64_t dtype_block_size(DType t);
int64_t dtype_block_bytes(DType t);
// Bytes of one row of n values; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t bits_from_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// IEEE half <-> float, exact in the f16 -> f32 direction, round-to-nearest-even back.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // Subnormal half: value = man * 2^-24.
    float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f);

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
uint16_t f32_to_bf16(float f);

}  // namespace sy
