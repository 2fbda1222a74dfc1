// splitmix64's finalizer: a bijective 64-bit mix, for deriving independent seeds and
// counter-based random numbers from one key.
#pragma once

#include <cstdint>

namespace sy {

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace sy
