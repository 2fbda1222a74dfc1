#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dot.h"

namespace sy::cpu {
namespace {

bool isa_is(const char* name) {
  const char* isa = std::getenv("SY_ISA");
  return isa && std::strcmp(isa, name) == 0;
}

}  // namespace

bool isa_forced_scalar() { return isa_is("scalar"); }
bool isa_forced_avx2() { return isa_is("avx2"); }

const DotKernels& dot_kernels() {
  static const DotKernels& chosen = []() -> const DotKernels& {
    if (isa_forced_scalar()) return dot_kernels_scalar();
    if (!isa_forced_avx2()) {
      if (const DotKernels* k = dot_kernels_avx512()) return *k;
    }
    if (const DotKernels* k = dot_kernels_avx2()) return *k;
    return dot_kernels_scalar();
  }();
  return chosen;
}

}  // namespace sy::cpu
