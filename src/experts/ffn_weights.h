// A SwiGLU feed-forward block, down(silu(gate x) * up x): the shape of every expert,
// shared expert and dense FFN in the supported families.
#pragma once

#include "base/weight_matrix.h"

namespace sy {

struct FfnWeights {
  WeightMatrix gate, up, down;
  bool empty() const { return gate.empty(); }
  // Matrix i in file order: gate (0), up (1), down (2).
  WeightMatrix& part(int i) { return i == 0 ? gate : i == 1 ? up : down; }
  size_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

}  // namespace sy
