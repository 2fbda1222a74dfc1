// clang 14 does not know every CPU feature name the AVX2 / AVX-512 kernel files test with
// __builtin_cpu_supports, so the fuzz build leaves those files out and runs the portable
// kernels (the parsers are what it exercises).
#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"

namespace sy::cpu {
const DotKernels* dot_kernels_avx2() { return nullptr; }
const PackedKernels* packed_kernels_avx2() { return nullptr; }
const PackedKernels* packed_kernels_avx512vnni() { return nullptr; }
}  // namespace sy::cpu
