#include "kernels/cpu/weight_prep.h"

#include <cstring>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/tiles16.h"

namespace sy::cpu {

bool packing_enabled() {
  static const bool enabled = [] {
    return &packed_kernels() != &packed_kernels_scalar();
  }();
  return enabled;
}

bool packs_at_load(const WeightMatrix& w) { return !w.packed && packable(w.dtype, w.cols) && packing_enabled(); }

bool takes_tiles16(const WeightMatrix& w, bool allow_tiles16) {
  return allow_tiles16 && !w.tiles16 && tiles16_shape(w.dtype, w.rows, w.cols) && tiles16_kernels() != nullptr;
}

bool copied_at_load(const WeightMatrix& w, bool allow_tiles16) {
  return (w.packed && packable(w.dtype, w.cols)) || packs_at_load(w) || takes_tiles16(w, allow_tiles16);
}

namespace {

// `w` (GGUF or packed rows) in 16-row tiles at dst.
void lay_out_tiles16(const WeightMatrix& w, uint8_t* dst, ThreadPool& pool) {
  const int64_t blocks = w.cols / kQBlock;
  const int64_t tile_bytes = blocks * kTiles16BlockBytes;
  pool.parallel_for(w.rows / kTileRows16, [&](int64_t g, int) {
    std::vector<BlockQ4_0> unpacked;
    const BlockQ4_0* rows[kTileRows16];
    if (w.packed) unpacked.resize(kTileRows16 * blocks);
    for (int64_t n = 0; n < kTileRows16; ++n) {
      const uint8_t* row = w.row(g * kTileRows16 + n);
      if (w.packed) {
        unpack_row(w.dtype, row, unpacked.data() + n * blocks, w.cols);
        rows[n] = unpacked.data() + n * blocks;
      } else {
        rows[n] = reinterpret_cast<const BlockQ4_0*>(row);
      }
    }
    pack_tile16(rows, w.cols, dst + g * tile_bytes);
  });
}

}  // namespace

WeightMatrix prepare_weight(const WeightMatrix& w, WeightArena& arena, ThreadPool& pool, bool allow_tiles16) {
  if (!copied_at_load(w, allow_tiles16)) return w;
  if (takes_tiles16(w, allow_tiles16)) {
    WeightMatrix t = w;
    uint8_t* dst = arena.allocate(w.bytes());
    lay_out_tiles16(w, dst, pool);
    t.data = dst;
    t.packed = false;
    t.tiles16 = true;
    return t;
  }
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
  if (w.tiles16) dequantize_tiles16_row(w.data, w.cols, r, out);
  else if (w.packed) dequantize_packed_row(w.dtype, w.row(r), out, w.cols);
  else dequantize_row(w.dtype, w.row(r), out, w.cols);
}

}  // namespace sy::cpu
