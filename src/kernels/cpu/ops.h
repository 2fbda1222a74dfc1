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

// Rotated dimensions per head at most (rope.dimension_count is checked against it).
constexpr int kMaxRopeDims = 512;
// A position's n_rot / 2 rotation cosines, then its n_rot / 2 sines (n_rot floats): the
// same for every head and layer, so a forward step computes them once per token.
void rope_angles(int32_t pos, const RopeParams& p, float* cos_sin);
// Rotates n_heads heads of head_dim values in place by angles from rope_angles.
void rope_rotate(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p);
// Both, for one position.
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

}  // namespace sy::cpu
