#include "kernels/cpu/weight_prep.h"

#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"

namespace sy::cpu {

bool packing_enabled() {
  static const bool enabled = [] {
    return &packed_kernels() != &packed_kernels_scalar();
  }();
  return enabled;
}

bool packs_at_load(const WeightMatrix& w) { return !w.packed && packable(w.dtype, w.cols) && packing_enabled(); }

bool copied_at_load(const WeightMatrix& w) { return (w.packed && packable(w.dtype, w.cols)) || packs_at_load(w); }

WeightMatrix prepare_weight(const WeightMatrix& w, WeightArena& arena, ThreadPool& pool) {
  if (!copied_at_load(w)) return w;
  // Packed in the file (`switchyard pack`) or packed now: either way into the arena, so
  // that the weights live in anonymous memory (huge pages where the arena gets them) that
  // memory pressure cannot evict, as every packed weight does.
  WeightMatrix p = w;
  uint8_t* dst = arena.allocate(w.bytes());
  const size_t rb = w.row_bytes();
  pool.parallel_for((w.rows + 255) / 256, [&](int64_t c, int) {
    const int64_t r0 = c * 256, r1 = std::min(w.rows, (c + 1) * 256);
    if (w.packed) std::memcpy(dst + r0 * rb, w.row(r0), (r1 - r0) * rb);
    else for (int64_t r = r0; r < r1; ++r) pack_row(w.dtype, w.row(r), dst + r * rb, w.cols);
  });
  p.data = dst;
  p.packed = true;
  return p;
}

void weight_row_to_f32(const WeightMatrix& w, int64_t r, float* out) {
  if (w.packed) dequantize_packed_row(w.dtype, w.row(r), out, w.cols);
  else dequantize_row(w.dtype, w.row(r), out, w.cols);
}

}  // namespace sy::cpu
