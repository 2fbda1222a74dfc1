#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dot.h"

namespace sy::cpu {

bool isa_forced_scalar() {
  const char* isa = std::getenv("SY_ISA");
  return isa && std::strcmp(isa, "scalar") == 0;
}

const DotKernels& dot_kernels() {
  static const DotKernels& chosen = []() -> const DotKernels& {
    if (isa_forced_scalar()) return dot_kernels_scalar();
    if (const DotKernels* k = dot_kernels_avx2()) return *k;
    return dot_kernels_scalar();
  }();
  return chosen;
}

}  // namespace sy::cpu
