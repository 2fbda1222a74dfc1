#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dot.h"

namespace sy::cpu {

const DotKernels& dot_kernels() {
  static const DotKernels& chosen = [] () -> const DotKernels& {
    const char* isa = std::getenv("SY_ISA");
    if (isa && std::strcmp(isa, "scalar") == 0) return dot_kernels_scalar();
    if (const DotKernels* k = dot_kernels_avx2()) return *k;
    return dot_kernels_scalar();
  }();
  return chosen;
}

}  // namespace sy::cpu
