// A read-only 2-D weight: `rows` output rows of `cols` input values each, every row
// stored contiguously in `dtype` (blocks for quantized types), either in GGUF's block
// layout or, when `packed`, in the kernels' packed layout (kernels/cpu/packed.h) with
// the same bytes per row.
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

  size_t row_bytes() const { return dtype_row_bytes(dtype, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  const uint8_t* row(int64_t r) const { return data + row_bytes() * static_cast<size_t>(r); }
  bool empty() const { return data == nullptr; }
};

}  // namespace sy
