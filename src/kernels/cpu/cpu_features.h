// CPU feature tests that both GCC and clang accept. clang 14's __builtin_cpu_supports does
// not know "f16c", so that one is read from CPUID (leaf 1, ECX bit 29) directly.
#pragma once

#include <cpuid.h>

namespace sy::cpu {

// Each reads CPUID once: in a VM every CPUID is an exit to the hypervisor (~30 us), and the
// kernel tables that ask are looked up on hot paths.
inline bool cpu_has_f16c() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  return has;
}

inline bool cpu_is_amd() {
  static const bool amd = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // "AuthenticAMD" in EBX, EDX, ECX.
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;
  }();
  return amd;
}

// The family CPUID leaf 1 gives (the base family, plus the extended one where the base is
// 15): AMD's Zen 3 and Zen 4 are 25, Zen 5 is 26.
inline unsigned cpu_family() {
  static const unsigned family = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0u;
    const unsigned base = (a >> 8) & 0xf;
    return base == 0xf ? base + ((a >> 20) & 0xff) : base;
  }();
  return family;
}

// AMX tiles with int8 multiplies (leaf 7: EDX bits 24 and 25) and AVX-512 VBMI (ECX bit
// 1), which clang 14's __builtin_cpu_supports does not know either.
inline bool cpu_has_amx_int8_vbmi() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) != 0 && (d & (1u << 25)) != 0 &&
           (c & (1u << 1)) != 0;
  }();
  return has;
}

}  // namespace sy::cpu
