// Reproducible normal(0, 1) test inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sy::test {

inline std::vector<float> random_normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace sy::test
