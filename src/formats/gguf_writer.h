// Writes GGUF v3 files: metadata of every type and tensors of any supported type.
// Used by `synth` (random-weight models) and by tests that need files with given contents.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "formats/gguf_reader.h"

namespace sy {

class GgufWriter {
 public:
  void set_version(uint32_t v) { version_ = v; }
  void set_alignment(uint32_t a);

  void add_uint32(const std::string& key, uint32_t v);
  void add_int32(const std::string& key, int32_t v);
  void add_uint64(const std::string& key, uint64_t v);
  void add_float32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_float32_array(const std::string& key, const std::vector<float>& v);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& v);
  // Any value as read by GgufReader (copying metadata from another file).
  void add_value(const std::string& key, const GgufValue& v);

  // shape in ggml order (shape[0] = row length); data must hold the tensor's bytes.
  // packed: the rows are in the kernels' packed layout (Q4_0 / Q8_0 only), written with
  // switchyard's own type number (gguf_packed_type).
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape,
                  std::vector<uint8_t> data, bool packed = false);

  // Streaming variant for outputs larger than memory: write() calls `rows` to produce the
  // tensor's bytes one block of rows at a time, in order, so that only about two blocks of
  // `block_bytes` are ever held. rows(first, last, dst) fills rows [first, last) of the
  // tensor (all dimensions after the first flattened) into dst, contiguously.
  using RowSource = std::function<void(int64_t first, int64_t last, uint8_t* dst)>;
  void add_tensor_rows(const std::string& name, DType type, const std::vector<int64_t>& shape,
                       RowSource rows, bool packed = false);

  // Bytes written so far and the file's total, after the header and after every block.
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  // Writes the file; tensor data that is produced while writing goes out in blocks of
  // about block_bytes while the next block is being produced. Throws before writing when
  // the disk has too little space; the bytes go to PATH.partial, renamed to PATH once
  // complete and removed on any error, so PATH is never a truncated model.
  void write(const std::string& path, const Progress& progress = {},
             size_t block_bytes = size_t{16} << 20) const;
  // Size write() will produce.
  uint64_t file_size() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    uint32_t type_number;  // as written: the GGUF number, or the packed one
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;  // empty when `rows` produces the bytes
    RowSource rows;
    size_t row_bytes = 0;
    int64_t n_rows = 0;
    size_t n_bytes() const { return row_bytes * static_cast<size_t>(n_rows); }
  };
  static Tensor describe(const std::string& name, DType type, const std::vector<int64_t>& shape, bool packed);
  std::vector<uint8_t> header(std::vector<uint64_t>& offsets) const;
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
};

}  // namespace sy
