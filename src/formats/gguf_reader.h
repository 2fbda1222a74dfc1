// GGUF v2/v3 reader over a memory-mapped file. Parses metadata and tensor infos once,
// bounds-checking every read; tensor data stays in the mapping and is used in place.
// Spec: github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "base/mapped_file.h"

namespace sy {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string gguf_type_name(GgufType t);

struct GgufValue;

struct GgufArray {
  GgufType elem_type = GgufType::UINT8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;            // packed little-endian numbers (numeric arrays)
  std::vector<std::string_view> strings;    // elem_type == STRING
  std::vector<GgufValue> items;             // elem_type == ARRAY (nested arrays)
};

struct GgufValue {
  GgufType type = GgufType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string_view, GgufArray> v;
  std::string to_string(size_t max_items = 8) const;  // for `info` and error messages
};

// switchyard's own tensor types: Q4_0 / Q8_0 weights stored in the CPU kernels' packed
// layout (kernels/cpu/packed.h), as `switchyard pack` writes them. Their numbers are far
// past ggml's, so that llama.cpp refuses such a file ("invalid ggml type") instead of
// reading the regrouped bytes as GGUF blocks.
uint32_t gguf_packed_type(DType t);
// The element type of a packed type number; false for any other number.
bool gguf_packed_dtype(uint32_t ggml_type, DType& out);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;
  bool packed = false;         // rows in the packed layout (a gguf_packed_type number)
  uint64_t offset = 0;         // relative to the data section
  size_t n_bytes = 0;
  const uint8_t* data = nullptr;

  int64_t n_elements() const;
  int64_t dim(size_t i) const { return i < shape.size() ? shape[i] : 1; }
};

class GgufFile {
 public:
  // Throws sy::Error naming the file and the problem for anything malformed.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  size_t file_size() const { return file_->size(); }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters: integers convert between widths when the value fits; a missing key
  // or a wrong type throws an error naming the key (the overloads with a default only
  // throw on a wrong type).
  uint64_t get_uint(const std::string& key) const;
  uint64_t get_uint(const std::string& key, uint64_t def) const;
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  const GgufArray& get_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  const std::vector<std::string_view>& get_string_array(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // See MappedFile::drop_pages.
  void drop_pages(const void* p, size_t n) const { file_->drop_pages(p, n); }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Throws "<file>: missing tensor 'name'" when absent.
  const GgufTensorInfo& tensor(const std::string& name) const;

 private:
  explicit GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}
  void parse();
  [[noreturn]] void fail(const std::string& what) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace sy
