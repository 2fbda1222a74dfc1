#include "formats/gguf_reader.h"

#include <cstring>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace sy {
namespace {

constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

// Bounds-checked little-endian cursor over the mapped header.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }

  void need(size_t n, const char* what) const {
    if (n > remaining()) {
      throw Error(path_ + ": truncated GGUF file: " + what + " at byte " + std::to_string(pos_) +
                  " needs " + std::to_string(n) + " bytes but the file ends at " +
                  std::to_string(size_));
    }
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(size_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, const std::string& path,
                     int depth);

GgufArray read_array(Cursor& c, const std::string& key, const std::string& path, int depth) {
  GgufArray a;
  a.elem_type = static_cast<GgufType>(c.read<uint32_t>("array type"));
  a.count = c.read<uint64_t>("array length");
  const size_t es = scalar_size(a.elem_type);
  if (es > 0) {
    if (a.count > c.remaining() / es) {
      throw Error(path + ": metadata '" + key + "': array of " + std::to_string(a.count) +
                  " elements runs past the end of the file (truncated or corrupt)");
    }
    a.data = c.here();
    c.skip(a.count * es, "array data");
  } else if (a.elem_type == GgufType::STRING) {
    if (a.count > c.remaining() / 8) {
      throw Error(path + ": metadata '" + key + "': string array of " + std::to_string(a.count) +
                  " elements runs past the end of the file (truncated or corrupt)");
    }
    a.strings.reserve(a.count);
    for (uint64_t i = 0; i < a.count; ++i) a.strings.push_back(c.read_string("array string"));
  } else if (a.elem_type == GgufType::ARRAY) {
    if (depth > 8) throw Error(path + ": metadata '" + key + "': arrays nested too deeply");
    if (a.count > c.remaining() / 12) {
      throw Error(path + ": metadata '" + key + "': nested array count runs past the end");
    }
    for (uint64_t i = 0; i < a.count; ++i) {
      a.items.push_back(read_value(c, GgufType::ARRAY, key, path, depth + 1));
    }
  } else {
    throw Error(path + ": metadata '" + key + "': unknown array element type " +
                std::to_string(static_cast<uint32_t>(a.elem_type)));
  }
  return a;
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, const std::string& path,
                     int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::UINT8: v.v = uint64_t{c.read<uint8_t>("value")}; break;
    case GgufType::UINT16: v.v = uint64_t{c.read<uint16_t>("value")}; break;
    case GgufType::UINT32: v.v = uint64_t{c.read<uint32_t>("value")}; break;
    case GgufType::UINT64: v.v = c.read<uint64_t>("value"); break;
    case GgufType::INT8: v.v = int64_t{c.read<int8_t>("value")}; break;
    case GgufType::INT16: v.v = int64_t{c.read<int16_t>("value")}; break;
    case GgufType::INT32: v.v = int64_t{c.read<int32_t>("value")}; break;
    case GgufType::INT64: v.v = c.read<int64_t>("value"); break;
    case GgufType::FLOAT32: v.v = double{c.read<float>("value")}; break;
    case GgufType::FLOAT64: v.v = c.read<double>("value"); break;
    case GgufType::BOOL: {
      uint8_t b = c.read<uint8_t>("value");
      if (b > 1) throw Error(path + ": metadata '" + key + "': bool value " + std::to_string(b));
      v.v = b != 0;
      break;
    }
    case GgufType::STRING: v.v = c.read_string("string value"); break;
    case GgufType::ARRAY: v.v = read_array(c, key, path, depth); break;
    default:
      throw Error(path + ": metadata '" + key + "': unknown value type " +
                  std::to_string(static_cast<uint32_t>(type)) + " (corrupt file?)");
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

constexpr uint32_t kPackedTypeBase = 0x53590000;  // "SY"

}  // namespace

uint32_t gguf_packed_type(DType t) {
  if (t != DType::Q4_0 && t != DType::Q8_0) throw Error("GGUF: only Q4_0 and Q8_0 tensors have a packed type, not " + dtype_name(t));
  return kPackedTypeBase | static_cast<uint32_t>(t);
}

bool gguf_packed_dtype(uint32_t ggml_type, DType& out) {
  if (ggml_type != gguf_packed_type(DType::Q4_0) && ggml_type != gguf_packed_type(DType::Q8_0)) return false;
  out = static_cast<DType>(ggml_type & 0xffff);
  return true;
}

std::string gguf_type_name(GgufType t) {
  static const char* kNames[] = {"uint8", "int8",  "uint16", "int16",  "uint32", "int32", "float32",
                                 "bool",  "string", "array", "uint64", "int64",  "float64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "type" + std::to_string(i);
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream os;
  if (auto* u = std::get_if<uint64_t>(&v)) os << *u;
  else if (auto* i = std::get_if<int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* b = std::get_if<bool>(&v)) os << (*b ? "true" : "false");
  else if (auto* s = std::get_if<std::string_view>(&v)) {
    std::string_view sv = s->substr(0, 120);
    os << '"' << sv << (s->size() > 120 ? "...\"" : "\"");
  } else if (auto* a = std::get_if<GgufArray>(&v)) {
    os << "[" << gguf_type_name(a->elem_type) << " x " << a->count << "]";
    (void)max_items;
  }
  return os.str();
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile(std::make_unique<MappedFile>(path)));
  f->parse();
  return f;
}

void GgufFile::fail(const std::string& what) const { throw Error(path() + ": " + what); }

void GgufFile::parse() {
  Cursor c(file_->data(), file_->size(), file_->path());
  if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0) {
    fail("not a GGUF file (bad magic; expected the bytes 'GGUF' at offset 0)");
  }
  c.skip(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) fail("GGUF version 1 is not supported; convert the model with a newer llama.cpp");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0 && (version_ >> 16) != 0) {
      fail("big-endian GGUF files are not supported");
    }
    fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2 and 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each entry needs at least 8 (key length) + 4 (type) + 1 bytes; reject absurd counts
  // before allocating anything for them.
  if (n_kv > c.remaining() / 13) fail("metadata count " + std::to_string(n_kv) + " exceeds what the file can hold (corrupt header)");
  if (n_tensors > c.remaining() / 24) fail("tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold (corrupt header)");

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key(c.read_string("metadata key"));
    auto type = static_cast<GgufType>(c.read<uint32_t>("metadata type"));
    GgufValue v = read_value(c, type, key, path(), 0);
    if (kv_index_.count(key)) fail("duplicate metadata key '" + key + "'");
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    const auto* u = std::get_if<uint64_t>(&a->v);
    if (a->type != GgufType::UINT32) {  // llama.cpp reads it as uint32 only
      fail("general.alignment must be stored as uint32, but it is a " +
           std::string(std::get_if<int64_t>(&a->v) ? "signed integer"
                       : std::get_if<double>(&a->v) ? "float"
                       : u                          ? "unsigned integer of another width"
                                                    : "non-number") +
           " (" + a->to_string() + ")");
    }
    if (!u || *u == 0 || (*u & (*u - 1)) != 0 || *u > 1u << 20) {
      fail("general.alignment must be a power of two, got " + a->to_string());
    }
    alignment_ = static_cast<uint32_t>(*u);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = std::string(c.read_string("tensor name"));
    const uint32_t n_dims = c.read<uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    int64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("tensor shape");
      if (ne == 0 || ne > (uint64_t{1} << 40) ||
          static_cast<uint64_t>(n_elem) > (uint64_t{1} << 50) / ne) {
        fail("tensor '" + t.name + "' has an invalid dimension " + std::to_string(ne));
      }
      t.shape.push_back(static_cast<int64_t>(ne));
      n_elem *= static_cast<int64_t>(ne);
    }
    t.ggml_type = c.read<uint32_t>("tensor type");
    t.offset = c.read<uint64_t>("tensor offset");
    if (gguf_packed_dtype(t.ggml_type, t.dtype)) {
      t.packed = true;
    } else if (is_supported_dtype(t.ggml_type)) {
      t.dtype = static_cast<DType>(t.ggml_type);
    } else {
      fail("tensor '" + t.name + "' has type " + dtype_name(t.ggml_type) +
           ", which switchyard does not support (supported: F32, F16, BF16, Q8_0, Q4_0); "
           "re-quantize the model to one of those");
    }
    if (t.shape[0] % dtype_block_size(t.dtype) != 0) {
      fail("tensor '" + t.name + "': row length " + std::to_string(t.shape[0]) +
           " is not a multiple of the " + dtype_name(t.dtype) + " block size " +
           std::to_string(dtype_block_size(t.dtype)));
    }
    t.n_bytes = dtype_row_bytes(t.dtype, t.shape[0]) * static_cast<size_t>(n_elem / t.shape[0]);
    if (tensor_index_.count(t.name)) fail("duplicate tensor name '" + t.name + "'");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  data_offset_ = align_up(c.pos(), alignment_);
  if (n_tensors > 0 && data_offset_ > file_->size()) fail("truncated GGUF file: the tensor data section is missing");
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      fail("tensor '" + t.name + "' data offset " + std::to_string(t.offset) +
           " is not aligned to " + std::to_string(alignment_));
    }
    const uint64_t avail = file_->size() - data_offset_;
    if (t.offset > avail || t.n_bytes > avail - t.offset) {
      fail("tensor '" + t.name + "' data (offset " + std::to_string(t.offset) + ", " +
           std::to_string(t.n_bytes) + " bytes) runs past the end of the file (" +
           std::to_string(file_->size()) + " bytes): truncated or corrupt file");
    }
    t.data = file_->data() + data_offset_ + t.offset;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v,
                             const char* wanted) {
  throw Error(path + ": metadata '" + key + "' has type " + gguf_type_name(v.type) + ", expected " +
              wanted);
}
}  // namespace

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("missing metadata key '" + key + "'");
  if (auto* u = std::get_if<uint64_t>(&v->v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v->v)) {
    if (*i < 0) fail("metadata '" + key + "' is negative (" + std::to_string(*i) + ")");
    return static_cast<uint64_t>(*i);
  }
  wrong_type(path(), key, *v, "an integer");
}

uint64_t GgufFile::get_uint(const std::string& key, uint64_t def) const {
  return has(key) ? get_uint(key) : def;
}

int64_t GgufFile::get_int(const std::string& key, int64_t def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (auto* i = std::get_if<int64_t>(&v->v)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail("metadata '" + key + "' is too large");
    return static_cast<int64_t>(*u);
  }
  wrong_type(path(), key, *v, "an integer");
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("missing metadata key '" + key + "'");
  if (auto* d = std::get_if<double>(&v->v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v->v)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&v->v)) return static_cast<double>(*i);
  wrong_type(path(), key, *v, "a number");
}

double GgufFile::get_float(const std::string& key, double def) const {
  return has(key) ? get_float(key) : def;
}

bool GgufFile::get_bool(const std::string& key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (auto* b = std::get_if<bool>(&v->v)) return *b;
  wrong_type(path(), key, *v, "a bool");
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("missing metadata key '" + key + "'");
  if (auto* s = std::get_if<std::string_view>(&v->v)) return std::string(*s);
  wrong_type(path(), key, *v, "a string");
}

std::string GgufFile::get_string(const std::string& key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

const GgufArray& GgufFile::get_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("missing metadata key '" + key + "'");
  if (auto* a = std::get_if<GgufArray>(&v->v)) return *a;
  wrong_type(path(), key, *v, "an array");
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufArray& a = get_array(key);
  std::vector<float> out(a.count);
  if (a.elem_type == GgufType::FLOAT32) {
    std::memcpy(out.data(), a.data, a.count * 4);
  } else if (a.elem_type == GgufType::FLOAT64) {
    for (uint64_t i = 0; i < a.count; ++i) {
      double d;
      std::memcpy(&d, a.data + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else {
    std::vector<int64_t> ints = get_int_array(key);
    for (uint64_t i = 0; i < a.count; ++i) out[i] = static_cast<float>(ints[i]);
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufArray& a = get_array(key);
  std::vector<int64_t> out(a.count);
  for (uint64_t i = 0; i < a.count; ++i) {
    const uint8_t* p = a.data + i * scalar_size(a.elem_type);
    switch (a.elem_type) {
      case GgufType::UINT8: out[i] = *p; break;
      case GgufType::INT8: out[i] = static_cast<int8_t>(*p); break;
      case GgufType::BOOL: out[i] = *p; break;
      case GgufType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
      case GgufType::INT16: { int16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
      case GgufType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case GgufType::INT32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case GgufType::UINT64: { uint64_t x; std::memcpy(&x, p, 8); out[i] = static_cast<int64_t>(x); break; }
      case GgufType::INT64: { int64_t x; std::memcpy(&x, p, 8); out[i] = x; break; }
      default: fail("metadata '" + key + "' is an array of " + gguf_type_name(a.elem_type) + ", expected integers");
    }
  }
  return out;
}

const std::vector<std::string_view>& GgufFile::get_string_array(const std::string& key) const {
  const GgufArray& a = get_array(key);
  if (a.elem_type != GgufType::STRING) {
    fail("metadata '" + key + "' is an array of " + gguf_type_name(a.elem_type) + ", expected strings");
  }
  return a.strings;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) fail("missing tensor '" + name + "' (the file is incomplete or not for this architecture)");
  return *t;
}

}  // namespace sy
