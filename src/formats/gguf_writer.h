// Writes GGUF v3 files: metadata of every type and tensors of any supported type.
// Used by `synth` (random-weight models) and by tests that need files with given contents.
#pragma once

#include <cstdint>
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
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape,
                  std::vector<uint8_t> data);

  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
};

}  // namespace sy
