// What an AVX-512 VNNI kernel file starts with (x86-64 only): the intrinsics, and
// SY_VNNI, the target attribute its kernels are compiled for.
#pragma once

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed intrinsics with deliberately undefined vectors, which
// -Wmaybe-uninitialized reports at every use once inlined into the including file.
// (Clang has no such warning and would warn about the unknown name.)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#define SY_VNNI __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,fma,f16c")))
#endif
