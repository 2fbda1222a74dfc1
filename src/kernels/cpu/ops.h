// Element-wise and per-row operations of the transformer block, on float rows.
#pragma once

#include <cstdint>

namespace sy::cpu {

// y = x / sqrt(mean(x^2) + eps) * weight   (weight may be null). Sum in double, as ggml.
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* y);

// Numerically stable softmax in place (sum in double, as ggml).
void softmax(float* x, int64_t n);

// x[i] = exp(x[i] - max) with libm's exp for max = the largest of n >= 1 values, which goes
// to *max; returns the sum, in double. softmax and the scalar attention kernel share it.
double exp_minus_max(float* x, int64_t n, float* max);

// gate[i] = silu(gate[i]) * up[i]
void swiglu(float* gate, const float* up, int64_t n);


enum class RopeType { Norm, Neox };  // Norm rotates pairs (2i, 2i+1); Neox pairs (i, i + n_rot/2)

struct RopeParams {
  RopeType type = RopeType::Norm;
  int n_rot = 0;             // rotated dimensions per head (<= head_dim; the rest pass through)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1 / linear scaling factor
};

// Rotates n_heads heads of head_dim values at one position, in place.
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

}  // namespace sy::cpu
