#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/ascii.h"
#include "kernels/cpu/dot.h"

namespace sy::cpu {
namespace {

// SY_ISA caps the kernels (tests and comparisons on a machine with a newer CPU). A value
// it does not know is said once, rather than silently running the best kernels while a
// job believes it tests a lower path.
bool isa_is(const char* name) {
  static const std::string isa = [] {
    const char* v = std::getenv("SY_ISA");
    const std::string s = ascii_lower(v ? v : "");
    if (!s.empty() && s != "scalar" && s != "avx2" && s != "avx512") {
      std::fprintf(stderr,
                   "warning: SY_ISA=%s is not one of scalar, avx2, avx512; using the best kernels this CPU has\n", v);
    }
    return s;
  }();
  return isa == name;
}

}  // namespace

bool isa_forced_scalar() { return isa_is("scalar"); }
bool isa_forced_avx2() { return isa_is("avx2"); }
bool isa_forced_avx512() { return isa_is("avx512"); }

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
