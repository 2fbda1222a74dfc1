// CPU feature tests that both GCC and clang accept. clang 14's __builtin_cpu_supports does
// not know "f16c", so that one is read from CPUID (leaf 1, ECX bit 29) directly.
#pragma once

#include <cpuid.h>

namespace sy::cpu {

inline bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

}  // namespace sy::cpu
