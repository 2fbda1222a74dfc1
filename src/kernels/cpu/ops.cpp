#include "kernels/cpu/ops.h"

#include <cmath>

#include "kernels/cpu/dot.h"

namespace sy::cpu {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  const double sum = dot_kernels().sum_squares(x, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  if (weight) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

double exp_minus_max(float* x, int64_t n, float* max) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  *max = m;
  return sum;
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max;
  const float inv = static_cast<float>(1.0 / exp_minus_max(x, n, &max));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void rope_angles(int32_t pos, const RopeParams& p, float* cos_sin) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const int half = p.n_rot / 2;
  // Angles computed by repeated multiplication in float, the way ggml does, so that
  // positions in the thousands give the same rounding.
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float t = p.freq_scale * theta;
    cos_sin[i] = std::cos(t);
    cos_sin[half + i] = std::sin(t);
    theta *= theta_scale;
  }
}

void rope_rotate(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p) {
  const int half = p.n_rot / 2;
  const float* cos_t = cos_sin;
  const float* sin_t = cos_sin + half;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    if (p.type == RopeType::Neox) {
      float* v1 = v + half;
      for (int i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v1[i];
        v[i] = x0 * cos_t[i] - x1 * sin_t[i];
        v1[i] = x0 * sin_t[i] + x1 * cos_t[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
        v[2 * i + 1] = x0 * sin_t[i] + x1 * cos_t[i];
      }
    }
  }
}

void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p) {
  float cos_sin[kMaxRopeDims];
  rope_angles(pos, p, cos_sin);
  rope_rotate(x, n_heads, head_dim, cos_sin, p);
}

}  // namespace sy::cpu
