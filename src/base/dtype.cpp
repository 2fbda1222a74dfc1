#include "base/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "base/error.h"

namespace sy {

bool is_supported_dtype(uint32_t t) {
  switch (static_cast<DType>(t)) {
    case DType::F32:
    case DType::F16:
    case DType::Q4_0:
    case DType::Q8_0:
    case DType::BF16:
      return true;
  }
  return false;
}

std::string dtype_name(uint32_t t) {
  // Names of the common GGUF types, so an unsupported file says what it holds.
  static const char* kNames[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1",
                                 "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                                 "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
                                 "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
                                 "BF16"};
  if (t < sizeof(kNames) / sizeof(kNames[0])) return kNames[t];
  return "type" + std::to_string(t);
}

std::string dtype_name(DType t) { return dtype_name(static_cast<uint32_t>(t)); }

DType parse_dtype(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::toupper(c); });
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    if (dtype_name(t) == n) return t;
  }
  throw Error("unknown tensor type '" + name + "': use one of f32, f16, bf16, q8_0, q4_0");
}

int64_t dtype_block_size(DType t) {
  return (t == DType::Q8_0 || t == DType::Q4_0) ? kQBlock : 1;
}

int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::Q8_0: return sizeof(BlockQ8_0);
    case DType::Q4_0: return sizeof(BlockQ4_0);
  }
  throw Error("unsupported tensor type " + dtype_name(t));
}

size_t dtype_row_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_size(t) * dtype_block_bytes(t));
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = bits_from_f32(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  }
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (abs < 0x38800000) {
    // Result is subnormal (or zero): scale to units of 2^-24 and round to nearest even.
    float v = f32_from_bits(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v)));
  }
  // Normal: rebias exponent, round mantissa to 10 bits, nearest even.
  uint32_t mant = abs + 0xfff + ((abs >> 13) & 1);
  return static_cast<uint16_t>(sign | ((mant - 0x38000000) >> 13));
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_from_f32(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace sy
