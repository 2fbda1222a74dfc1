#include "model/packed_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "kernels/cpu/packed.h"

namespace sy {

bool packs_tensor(const GgufTensorInfo& t) {
  return !t.packed && t.shape.size() >= 2 && t.shape.size() <= 3 && cpu::packable(t.dtype, t.shape[0]);
}

PackStats write_packed_model(const std::string& in, const std::string& out, ThreadPool& pool,
                             const GgufWriter::Progress& progress) {
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec)) {
    throw Error("pack: the output " + out + " is the input file; write the packed copy to another path");
  }
  const auto f = GgufFile::open(in);
  GgufWriter w;
  w.set_version(3);
  bool has_alignment = false;
  for (const auto& [key, value] : f->metadata()) {
    if (key == "general.alignment") has_alignment = true;  // set_alignment writes it back
    else w.add_value(key, value);
  }
  if (has_alignment) w.set_alignment(f->alignment());
  PackStats st;
  int64_t already = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    const bool pack = packs_tensor(t);
    const size_t row_bytes = dtype_row_bytes(t.dtype, t.shape[0]);
    const uint8_t* src = t.data;
    const DType type = t.dtype;
    const int64_t cols = t.shape[0];
    w.add_tensor_rows(
        t.name, t.dtype, t.shape,
        [=, &pool](int64_t first, int64_t last, uint8_t* dst) {
          if (!pack) {
            std::memcpy(dst, src + first * row_bytes, (last - first) * row_bytes);
            return;
          }
          constexpr int64_t kRows = 64;  // per task
          pool.parallel_for((last - first + kRows - 1) / kRows, [&](int64_t c, int) {
            for (int64_t r = first + c * kRows; r < std::min(last, first + (c + 1) * kRows); ++r) {
              cpu::pack_row(type, src + r * row_bytes, dst + (r - first) * row_bytes, cols);
            }
          });
        },
        pack || t.packed);
    st.tensors++;
    already += t.packed;
    if (pack) {
      st.packed++;
      st.packed_bytes += t.n_bytes;
    }
  }
  if (st.packed == 0) {
    throw Error(already > 0 ? "pack: " + in + " is packed already (its " + std::to_string(already) + " Q4_0/Q8_0 matrices are in the packed layout)"
                            : "pack: " + in + " has no Q4_0 or Q8_0 weight matrices with rows of 256 values or more; only those have a packed layout");
  }
  w.write(out, progress);
  st.file_bytes = w.file_size();
  return st;
}

}  // namespace sy
