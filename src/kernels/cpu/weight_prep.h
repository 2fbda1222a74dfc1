// Puts weights in the layout the CPU kernels read fastest. Q4_0 / Q8_0 matrices become
// packed (kernels/cpu/packed.h) when this CPU has the integer kernels for it; the copy
// lives in the arena and the source pages of the file mapping can be dropped.
#pragma once

#include "base/thread_pool.h"
#include "base/weight_arena.h"
#include "base/weight_matrix.h"

namespace sy::cpu {

// True when Q4_0 / Q8_0 weights should be packed (integer kernels for the packed layout
// on this CPU, AVX-512 VNNI or AVX2, and SY_ISA is not "scalar").
bool packing_enabled();

// True when `w` is to be packed as it is loaded: packable rows in the GGUF layout, with
// packing enabled (a file written by `switchyard pack` holds them packed already).
bool packs_at_load(const WeightMatrix& w);

// True when `w`, a Q4_0 matrix in the GGUF or packed layout, is to be laid out in 16-row
// tiles (kernels/cpu/tiles16.h): the tile kernels run on this CPU and the caller allows it.
// Experts keep the packed layout: the tiered expert store reads and packs them itself, and
// a cached expert must give the resident one's bits.
bool takes_tiles16(const WeightMatrix& w, bool allow_tiles16);

// True when prepare_weight copies `w` into the arena (its bytes then sit in anonymous
// memory, not in the file's page cache).
bool copied_at_load(const WeightMatrix& w, bool allow_tiles16 = false);

// The matrix to compute with: `w` itself, or a packed or tiles16 copy in `arena` (also for
// a matrix packed in the file already).
WeightMatrix prepare_weight(const WeightMatrix& w, WeightArena& arena, ThreadPool& pool, bool allow_tiles16 = false);

// Row r of any weight as floats (embedding lookups).
void weight_row_to_f32(const WeightMatrix& w, int64_t r, float* out);

}  // namespace sy::cpu
