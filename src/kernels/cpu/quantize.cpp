#include "kernels/cpu/quantize.h"

#include <cmath>
#include <cstring>

#include "base/error.h"

namespace sy::cpu {

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      const float a = std::fabs(xb[j]);
      amax = a > amax ? a : amax;  // not std::fmax: that is a libm call per value
    }
    const float d = amax / 127.0f;
    // 127/amax rather than 1/d: the form ggml's x86 path uses, so ties round alike.
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = f32_to_f16(d);
    // Round half to even as nearbyint does in the default mode, by adding and removing
    // 1.5 * 2^23 (|x * id| <= 127); inline and vectorizable, unlike the libm call.
    constexpr float kMagic = 12582912.0f;
    for (int j = 0; j < kQBlock; ++j) y[b].q[j] = static_cast<int8_t>(static_cast<int>((xb[j] * id + kMagic) - kMagic));
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    // The value of largest magnitude maps to -8, keeping its sign (ggml's convention).
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kQBlock / 2; ++j) {
      auto q = [&](float v) {
        int i = static_cast<int>(v * id + 8.5f);
        return static_cast<uint8_t>(i > 15 ? 15 : i);
      };
      y[b].q[j] = static_cast<uint8_t>(q(xb[j]) | (q(xb[j + kQBlock / 2]) << 4));
    }
  }
}

void quantize_row(DType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case DType::F32: std::memcpy(y, x, n * sizeof(float)); return;
    case DType::F16: {
      auto* o = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_f16(x[i]);
      return;
    }
    case DType::BF16: {
      auto* o = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(x[i]);
      return;
    }
    case DType::Q8_0: quantize_row_q8_0(x, static_cast<BlockQ8_0*>(y), n); return;
    case DType::Q4_0: quantize_row_q4_0(x, static_cast<BlockQ4_0*>(y), n); return;
  }
  throw Error("quantize_row: unsupported type " + dtype_name(t));
}

void dequantize_row(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::F32: std::memcpy(y, x, n * sizeof(float)); return;
    case DType::F16: {
      auto* h = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(h[i]);
      return;
    }
    case DType::BF16: {
      auto* h = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<const BlockQ8_0*>(x);
      for (int64_t i = 0; i < n / kQBlock; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < kQBlock; ++j) y[i * kQBlock + j] = d * b[i].q[j];
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(x);
      for (int64_t i = 0; i < n / kQBlock; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < kQBlock / 2; ++j) {
          y[i * kQBlock + j] = d * ((b[i].q[j] & 0x0f) - 8);
          y[i * kQBlock + j + kQBlock / 2] = d * ((b[i].q[j] >> 4) - 8);
        }
      }
      return;
    }
  }
  throw Error("dequantize_row: unsupported type " + dtype_name(t));
}

}  // namespace sy::cpu
