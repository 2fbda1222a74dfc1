#include "formats/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>

#include "base/error.h"

namespace sy {
namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

size_t elem_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    default: return 8;
  }
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::UINT8: put<uint8_t>(out, static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
    case GgufType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
    case GgufType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
    case GgufType::UINT64: put<uint64_t>(out, std::get<uint64_t>(v.v)); break;
    case GgufType::INT8: put<int8_t>(out, static_cast<int8_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT16: put<int16_t>(out, static_cast<int16_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT32: put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case GgufType::INT64: put<int64_t>(out, std::get<int64_t>(v.v)); break;
    case GgufType::FLOAT32: put<float>(out, static_cast<float>(std::get<double>(v.v))); break;
    case GgufType::FLOAT64: put<double>(out, std::get<double>(v.v)); break;
    case GgufType::BOOL: put<uint8_t>(out, std::get<bool>(v.v) ? 1 : 0); break;
    case GgufType::STRING: put_string(out, std::get<std::string_view>(v.v)); break;
    case GgufType::ARRAY: {
      const GgufArray& a = std::get<GgufArray>(v.v);
      put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(out, a.count);
      if (a.elem_type == GgufType::STRING) {
        for (auto s : a.strings) put_string(out, s);
      } else if (a.elem_type == GgufType::ARRAY) {
        for (const auto& item : a.items) put_value(out, item);
      } else {
        out.insert(out.end(), a.data, a.data + a.count * elem_size(a.elem_type));
      }
      break;
    }
  }
}

}  // namespace

void GgufWriter::set_alignment(uint32_t a) {
  if (a == 0 || (a & (a - 1)) != 0) throw Error("GGUF alignment must be a power of two");
  alignment_ = a;
  add_uint32("general.alignment", a);
}

#define SY_ADD_SCALAR(fn, T, tag)                       \
  void GgufWriter::fn(const std::string& key, T v) {    \
    put_string(kv_, key);                               \
    put<uint32_t>(kv_, static_cast<uint32_t>(tag));     \
    put<T>(kv_, v);                                     \
    ++n_kv_;                                            \
  }
SY_ADD_SCALAR(add_uint32, uint32_t, GgufType::UINT32)
SY_ADD_SCALAR(add_int32, int32_t, GgufType::INT32)
SY_ADD_SCALAR(add_uint64, uint64_t, GgufType::UINT64)
SY_ADD_SCALAR(add_float32, float, GgufType::FLOAT32)
#undef SY_ADD_SCALAR

void GgufWriter::add_bool(const std::string& key, bool v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::BOOL));
  put<uint8_t>(kv_, v ? 1 : 0);
  ++n_kv_;
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::STRING));
  put_string(kv_, v);
  ++n_kv_;
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::ARRAY));
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::STRING));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
  ++n_kv_;
}

void GgufWriter::add_float32_array(const std::string& key, const std::vector<float>& v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::ARRAY));
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::FLOAT32));
  put<uint64_t>(kv_, v.size());
  for (float x : v) put<float>(kv_, x);
  ++n_kv_;
}

void GgufWriter::add_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::ARRAY));
  put<uint32_t>(kv_, static_cast<uint32_t>(GgufType::INT32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put<int32_t>(kv_, x);
  ++n_kv_;
}

void GgufWriter::add_value(const std::string& key, const GgufValue& v) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(v.type));
  put_value(kv_, v);
  ++n_kv_;
}

GgufWriter::Tensor GgufWriter::describe(const std::string& name, DType type, const std::vector<int64_t>& shape, bool packed) {
  if (shape.empty()) throw Error("GGUF writer: tensor '" + name + "' has no dimensions");
  for (int64_t d : shape) {
    if (d < 0) throw Error("GGUF writer: tensor '" + name + "' has a dimension of " + std::to_string(d));
  }
  if (shape[0] % dtype_block_size(type) != 0) {
    throw Error("GGUF writer: tensor '" + name + "' has rows of " + std::to_string(shape[0]) + " values, not a multiple of the " +
                dtype_name(type) + " block size " + std::to_string(dtype_block_size(type)));
  }
  Tensor t{name, type, packed ? gguf_packed_type(type) : static_cast<uint32_t>(type), shape, {}, {}, dtype_row_bytes(type, shape[0]), 1};
  for (size_t i = 1; i < shape.size(); ++i) t.n_rows *= shape[i];
  return t;
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape,
                            std::vector<uint8_t> data, bool packed) {
  Tensor t = describe(name, type, shape, packed);
  if (data.size() != t.n_bytes()) {
    throw Error("GGUF writer: tensor '" + name + "' has " + std::to_string(data.size()) + " bytes, its shape needs " + std::to_string(t.n_bytes()));
  }
  t.data = std::move(data);
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor_rows(const std::string& name, DType type, const std::vector<int64_t>& shape,
                                 RowSource rows, bool packed) {
  if (!rows) throw Error("GGUF writer: tensor '" + name + "' has no row source");
  Tensor t = describe(name, type, shape, packed);
  t.rows = std::move(rows);
  tensors_.push_back(std::move(t));
}

std::vector<uint8_t> GgufWriter::header(std::vector<uint64_t>& offsets) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, version_);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, n_kv_);
  head.insert(head.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  offsets.clear();
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, t.type_number);
    put<uint64_t>(head, offset);
    offsets.push_back(offset);
    offset = (offset + t.n_bytes() + alignment_ - 1) / alignment_ * alignment_;
  }
  head.resize((head.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  return head;
}

uint64_t GgufWriter::file_size() const {
  std::vector<uint64_t> offsets;
  const uint64_t head = header(offsets).size();
  return tensors_.empty() ? head : head + offsets.back() + tensors_.back().n_bytes();
}

void GgufWriter::write(const std::string& path, const Progress& progress, size_t block_bytes) const {
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> head = header(offsets);
  const uint64_t total = tensors_.empty() ? head.size() : head.size() + offsets.back() + tensors_.back().n_bytes();

  // Multi-GB outputs: say at once when they cannot fit, and never leave a truncated file
  // under the final name (written as PATH.partial, renamed when complete).
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  std::error_code ec, ec_old;
  const fs::space_info space = fs::space(dir, ec);
  uint64_t replaced = 0;  // a file this one replaces frees its space
  if (fs::is_regular_file(path, ec_old)) replaced = fs::file_size(path, ec_old);
  if (!ec && space.available != static_cast<uintmax_t>(-1) && total > space.available + replaced) {
    throw Error("cannot write " + path + ": it needs " + std::to_string(total / 1000000) + " MB and " + dir.string() +
                " has " + std::to_string(space.available / 1000000) + " MB free; write it to another disk");
  }
  const std::string partial = path + ".partial";
  struct RemoveUnlessDone {
    const std::string& p;
    bool done = false;
    ~RemoveUnlessDone() {
      std::error_code e;
      if (!done) fs::remove(p, e);
    }
  } cleanup{partial};

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(partial.c_str(), "wb"), std::fclose);
  if (!f) throw Error("cannot write " + partial + ": " + std::strerror(errno));
  FILE* fp = f.get();
  int write_errno = 0;  // of the first failed write (they run one at a time)
  auto put_bytes = [fp, &write_errno](const uint8_t* p, size_t n) {
    if (std::fwrite(p, 1, n, fp) == n) return true;
    if (write_errno == 0) write_errno = errno;
    return false;
  };
  bool ok = put_bytes(head.data(), head.size());
  uint64_t done = head.size();
  if (progress) progress(done, total);

  // Produced blocks are written by a second thread while the next one is produced.
  std::vector<uint8_t> blocks[2];
  int cur = 0;
  std::future<bool> pending;
  auto finish_pending = [&] {
    if (pending.valid()) ok = pending.get() && ok;
  };
  uint64_t pos = 0;
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (size_t i = 0; i < tensors_.size() && ok; ++i) {
    const Tensor& t = tensors_[i];
    const size_t pad = offsets[i] - pos;
    if (t.rows) {
      const int64_t rows_per_block = std::max<int64_t>(1, static_cast<int64_t>(block_bytes / std::max<size_t>(1, t.row_bytes)));
      for (int64_t r = 0; r < t.n_rows && ok; r += rows_per_block) {
        const int64_t last = std::min(t.n_rows, r + rows_per_block);
        std::vector<uint8_t>& buf = blocks[cur];
        const size_t lead = r == 0 ? pad : 0;  // alignment padding goes out with the first block
        buf.assign(lead + t.row_bytes * static_cast<size_t>(last - r), 0);
        t.rows(r, last, buf.data() + lead);
        finish_pending();
        pending = std::async(std::launch::async, [&put_bytes, &buf] { return put_bytes(buf.data(), buf.size()); });
        cur ^= 1;
        done += buf.size();
        if (progress) progress(done, total);
      }
    } else {
      finish_pending();
      ok = ok && put_bytes(zeros.data(), pad) && put_bytes(t.data.data(), t.data.size());
      done += pad + t.data.size();
      if (progress) progress(done, total);
    }
    pos = offsets[i] + t.n_bytes();
  }
  finish_pending();
  if (ok && std::fflush(fp) != 0) {
    ok = false;
    write_errno = errno;
  }
  if (ok && std::fclose(f.release()) != 0) {
    ok = false;
    write_errno = errno;
  }
  if (!ok) throw Error("write failed: " + partial + ": " + std::strerror(write_errno ? write_errno : EIO));
  fs::rename(partial, path, ec);
  if (ec) throw Error("cannot rename " + partial + " to " + path + ": " + ec.message());
  cleanup.done = true;
}

}  // namespace sy
