// A SwiGLU feed-forward block, down(silu(gate x) * up x): the shape of every expert,
// shared expert and dense FFN in the supported families.
#pragma once

#include "base/weight_matrix.h"

namespace sy {

struct FfnWeights {
  WeightMatrix gate, up, down;
  bool empty() const { return gate.empty(); }
  size_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

}  // namespace sy
