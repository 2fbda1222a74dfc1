// A read-only 2-D weight: `rows` output rows of `cols` input values each, every row
// stored contiguously in `dtype` (blocks for quantized types), either in GGUF's block
// layout or, when `packed`, in the kernels' packed layout (kernels/cpu/packed.h) with
// the same bytes per row, or, when `tiles16`, in tiles of 16 rows (kernels/cpu/tiles16.h;
// the same bytes in all, but a row is no longer contiguous).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/dtype.h"

namespace sy {

struct WeightMatrix {
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  std::string name;  // for error messages and `info`
  bool packed = false;
  bool tiles16 = false;

  size_t row_bytes() const { return dtype_row_bytes(dtype, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  // Row r's bytes (not for tiles16 matrices).
  const uint8_t* row(int64_t r) const { return data + row_bytes() * static_cast<size_t>(r); }
  // Whether two matrices are laid out alike (the same prepared input serves both).
  bool same_layout(const WeightMatrix& o) const {
    return dtype == o.dtype && cols == o.cols && packed == o.packed && tiles16 == o.tiles16;
  }
  bool empty() const { return data == nullptr; }
};

}  // namespace sy
