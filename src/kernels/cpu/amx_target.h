// What an AMX kernel file starts with (x86-64 Linux only): the intrinsics, SY_AMX, the
// target attribute its kernels are compiled for, and the tile instructions.
#pragma once

#if defined(__x86_64__) && defined(__linux__)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see avx512_vnni_target.h
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#define SY_AMX \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vbmi,avx512vnni,fma,f16c,amx-tile,amx-int8")))

// Tile loads, stores and multiplies (tile numbers are immediates). Written here with a
// memory clobber on the loads too: the compiler must not move the stores that fill a
// tile's bytes past the instruction that reads them. (So a kernel keeps what it reads of
// its inputs' members in locals: they would be reloaded after every tile instruction.)
#define SY_TILE_LOAD(t, base, stride) \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define SY_TILE_STORE(t, base, stride) \
  __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define SY_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
// C += A x B, signed int8 both.
#define SY_TILE_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#endif
