// GGUF reader: real fixture files, a writer round trip over every metadata type, and
// real files corrupted in many ways (each must give an error naming the file and the
// problem, never a crash; this suite also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

std::string mixtral() { return test::shared_path("fixtures/mixtral/model.gguf"); }

// Offset of the first occurrence of `needle` in `bytes`.
size_t find_bytes(const std::vector<uint8_t>& bytes, const std::string& needle) {
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << needle;
  return static_cast<size_t>(it - bytes.begin());
}

template <class T>
void poke(std::vector<uint8_t>& b, size_t at, T v) { std::memcpy(&b[at], &v, sizeof(T)); }

// Writes the bytes to a temp file and returns the error GgufFile::open (and then
// Model::load) reports, or "" if both succeed.
std::string error_of(const std::vector<uint8_t>& bytes, bool load_model = false) {
  test::TempFile f;
  f.write(bytes);
  try {
    if (load_model) Model::load(f.path());
    else GgufFile::open(f.path());
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(f.path()), std::string::npos) << "error does not name the file: " << msg;
    return msg;
  }
  return "";
}

TEST(GgufReader, ReadsEveryFixtureModel) {
  for (std::string dir : {"mixtral", "qwen2moe", "olmoe", "qwen3moe"}) {
    auto f = GgufFile::open(test::shared_path("fixtures/" + dir + "/model.gguf"));
    EXPECT_EQ(f->version(), 3u);
    EXPECT_FALSE(f->tensors().empty());
    EXPECT_TRUE(f->get_string("general.architecture") == (dir == "mixtral" ? "llama" : dir));
    for (const auto& t : f->tensors()) {
      EXPECT_EQ(t.offset % f->alignment(), 0u) << t.name;
      EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size()) << t.name;
    }
  }
  auto f = GgufFile::open(mixtral());
  EXPECT_EQ(f->get_uint("llama.embedding_length"), 32u);
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_exps.weight").shape, (std::vector<int64_t>{32, 128, 8}));
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_NEAR(f->get_float("llama.rope.freq_base"), 1e6, 1e-3);
}

TEST(GgufReader, ReadsQuantizedTypes) {
  auto f = GgufFile::open(test::shared_path("fixtures/mixtral/model-q4_0.gguf"));
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").dtype, DType::Q4_0);
  EXPECT_EQ(f->tensor("token_embd.weight").dtype, DType::Q8_0);
  EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight").dtype, DType::F32);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").n_bytes, 32u * 32 / 32 * 18);
}

TEST(GgufReader, WriterRoundTripEveryValueType) {
  for (uint32_t version : {2u, 3u}) {
    GgufWriter w;
    w.set_version(version);
    w.set_alignment(64);
    w.add_uint32("u32", 7);
    w.add_int32("i32", -7);
    w.add_uint64("u64", 1ull << 40);
    w.add_float32("f32", 0.5f);
    w.add_bool("b", true);
    w.add_string("s", "héllo");
    w.add_string_array("sa", {"a", "", "ccc"});
    w.add_float32_array("fa", {1.0f, -2.5f});
    w.add_int32_array("ia", {3, -4, 5});
    std::vector<float> data(64 * 2);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    std::vector<uint8_t> bytes(data.size() * 4);
    std::memcpy(bytes.data(), data.data(), bytes.size());
    w.add_tensor("t", DType::F32, {64, 2}, bytes);
    w.add_tensor("h", DType::F16, {32}, std::vector<uint8_t>(64, 0));
    test::TempFile tmp;
    w.write(tmp.path());

    auto f = GgufFile::open(tmp.path());
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->get_uint("u32"), 7u);
    EXPECT_EQ(f->get_int("i32", 0), -7);
    EXPECT_EQ(f->get_uint("u64"), 1ull << 40);
    EXPECT_EQ(f->get_float("f32"), 0.5);
    EXPECT_TRUE(f->get_bool("b", false));
    EXPECT_EQ(f->get_string("s"), "héllo");
    EXPECT_EQ(f->get_string_array("sa").size(), 3u);
    EXPECT_EQ(f->get_string_array("sa")[2], "ccc");
    EXPECT_EQ(f->get_float_array("fa"), (std::vector<float>{1.0f, -2.5f}));
    EXPECT_EQ(f->get_int_array("ia"), (std::vector<int64_t>{3, -4, 5}));
    const auto& t = f->tensor("t");
    EXPECT_EQ(t.shape, (std::vector<int64_t>{64, 2}));
    EXPECT_EQ(std::memcmp(t.data, data.data(), bytes.size()), 0);
    EXPECT_EQ(f->tensor("h").offset % 64, 0u);
    // Wrong types and missing keys name the key.
    EXPECT_THROW(f->get_string("u32"), Error);
    try {
      f->get_uint("nope");
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
    }
  }
}

// Packed Q4_0 / Q8_0 tensors (written by `switchyard pack`) carry switchyard's own type
// numbers, far from ggml's, and read back as their element type with `packed` set.
TEST(GgufReader, PackedTypesRoundTrip) {
  GgufWriter w;
  w.add_tensor("q4", DType::Q4_0, {256, 2}, std::vector<uint8_t>(2 * 8 * 18, 1), true);
  w.add_tensor("q8", DType::Q8_0, {256, 1}, std::vector<uint8_t>(8 * 34, 2), true);
  w.add_tensor("plain", DType::Q4_0, {256, 1}, std::vector<uint8_t>(8 * 18, 3));
  EXPECT_THROW(w.add_tensor("f", DType::F16, {256}, std::vector<uint8_t>(512, 0), true), Error);
  test::TempFile tmp;
  w.write(tmp.path());
  auto f = GgufFile::open(tmp.path());
  const GgufTensorInfo& q4 = f->tensor("q4");
  EXPECT_TRUE(q4.packed);
  EXPECT_EQ(q4.dtype, DType::Q4_0);
  EXPECT_EQ(q4.ggml_type, gguf_packed_type(DType::Q4_0));
  EXPECT_GT(q4.ggml_type, 1000u);  // no ggml type: other readers refuse it
  EXPECT_EQ(q4.n_bytes, 2u * 8 * 18);
  EXPECT_TRUE(f->tensor("q8").packed);
  EXPECT_EQ(f->tensor("q8").dtype, DType::Q8_0);
  EXPECT_FALSE(f->tensor("plain").packed);
  DType d;
  EXPECT_FALSE(gguf_packed_dtype(static_cast<uint32_t>(DType::Q4_0), d));
  EXPECT_FALSE(gguf_packed_dtype(gguf_packed_type(DType::Q4_0) + 1, d));
}

// A write that fails half-way (here a row source that throws) leaves neither a truncated
// file under the final name nor its .partial.
TEST(GgufWriter, FailedWriteLeavesNoFile) {
  test::TempFile tmp;
  GgufWriter w;
  w.add_tensor_rows("a", DType::F32, {64, 1000}, [](int64_t, int64_t, uint8_t* dst) { std::memset(dst, 0, 64 * 4); });
  w.add_tensor_rows("b", DType::F32, {64, 1000}, [](int64_t first, int64_t, uint8_t*) {
    if (first >= 0) throw Error("row source failed");
  });
  EXPECT_THROW(w.write(tmp.path(), {}, 4096), Error);
  EXPECT_FALSE(std::filesystem::exists(tmp.path()));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + ".partial"));
  GgufWriter ok;
  ok.add_tensor("a", DType::F32, {4}, std::vector<uint8_t>(16, 0));
  ok.write(tmp.path());
  EXPECT_TRUE(std::filesystem::exists(tmp.path()));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + ".partial"));
}

TEST(GgufCorrupt, BadMagic) {
  auto b = test::read_bytes(mixtral());
  b[0] = 'X';
  EXPECT_NE(error_of(b).find("bad magic"), std::string::npos);
}

TEST(GgufCorrupt, BadVersion) {
  auto b = test::read_bytes(mixtral());
  poke<uint32_t>(b, 4, 99);
  EXPECT_NE(error_of(b).find("unsupported GGUF version 99"), std::string::npos);
  poke<uint32_t>(b, 4, 1);
  EXPECT_NE(error_of(b).find("version 1"), std::string::npos);
  poke<uint32_t>(b, 4, 0x03000000);
  EXPECT_NE(error_of(b).find("big-endian"), std::string::npos);
}

TEST(GgufCorrupt, TruncatedAnywhere) {
  const auto full = test::read_bytes(mixtral());
  auto f = GgufFile::open(mixtral());
  // Cut inside the header, the metadata, the tensor infos and the tensor data.
  for (size_t cut : {size_t{3}, size_t{10}, size_t{30}, size_t{200}, size_t{5000}, f->data_offset() - 20,
                     f->data_offset() + 100, full.size() - 1}) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<long>(cut));
    const std::string e = error_of(b);
    EXPECT_FALSE(e.empty()) << "cut at " << cut;
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("past the end") != std::string::npos ||
                e.find("bad magic") != std::string::npos || e.find("exceeds") != std::string::npos)
        << e;
  }
}

// Byte offset of a tensor-info field: name, then n_dims (u32), dims (u64 each), type (u32), offset (u64).
struct InfoAt {
  size_t n_dims, dims, type, offset;
};
InfoAt tensor_info(const std::vector<uint8_t>& b, const std::string& name, size_t n_dims) {
  // Tensor infos come after all metadata; search from the last occurrence of the name.
  size_t at = 0;
  for (size_t p = 0;;) {
    auto it = std::search(b.begin() + static_cast<long>(p), b.end(), name.begin(), name.end());
    if (it == b.end()) break;
    at = static_cast<size_t>(it - b.begin());
    p = at + 1;
    if (p > 2'000'000) break;
  }
  const size_t nd = at + name.size();
  return {nd, nd + 4, nd + 4 + 8 * n_dims, nd + 8 + 8 * n_dims};
}

TEST(GgufCorrupt, TensorFields) {
  const auto full = test::read_bytes(mixtral());
  const InfoAt at = tensor_info(full, "output_norm.weight", 1);
  {
    auto b = full;
    poke<uint64_t>(b, at.offset, 1ull << 40);
    EXPECT_NE(error_of(b).find("runs past the end"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint64_t>(b, at.offset, 4);
    EXPECT_NE(error_of(b).find("not aligned"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint32_t>(b, at.type, 12);  // Q4_K
    const std::string e = error_of(b);
    EXPECT_NE(e.find("Q4_K"), std::string::npos) << e;
    EXPECT_NE(e.find("does not support"), std::string::npos) << e;
    poke<uint32_t>(b, at.type, 1234);
    EXPECT_NE(error_of(b).find("type1234"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint32_t>(b, at.n_dims, 7);
    EXPECT_NE(error_of(b).find("dimensions"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint64_t>(b, at.dims, 0);
    EXPECT_NE(error_of(b).find("invalid dimension"), std::string::npos);
  }
  {
    // A shape that disagrees with the hyperparameters (data still inside the file).
    auto b = full;
    poke<uint64_t>(b, at.dims, 16);
    const std::string e = error_of(b, /*load_model=*/true);
    EXPECT_NE(e.find("output_norm.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("shape"), std::string::npos) << e;
  }
}

// llama.cpp reads general.alignment as uint32; another type is named, not called "not a
// power of two".
TEST(GgufCorrupt, AlignmentOfAnotherType) {
  GgufWriter w;
  w.add_int32("general.alignment", 32);
  test::TempFile f;
  w.write(f.path());
  const std::string e = error_of(test::read_bytes(f.path()));
  EXPECT_NE(e.find("general.alignment must be stored as uint32, but it is a signed integer (32)"), std::string::npos)
      << e;
}

TEST(GgufCorrupt, CountsAndLengths) {
  const auto full = test::read_bytes(mixtral());
  {
    auto b = full;
    poke<uint64_t>(b, 16, 1ull << 60);  // metadata count
    EXPECT_NE(error_of(b).find("metadata count"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint64_t>(b, 8, 1ull << 60);  // tensor count
    EXPECT_NE(error_of(b).find("tensor count"), std::string::npos);
  }
  {
    auto b = full;
    poke<uint64_t>(b, 24, 1ull << 62);  // length of the first key
    EXPECT_NE(error_of(b).find("truncated"), std::string::npos);
  }
  {
    auto b = full;
    const size_t key = find_bytes(b, "general.architecture");
    poke<uint32_t>(b, key + 20, 77);  // value type
    EXPECT_NE(error_of(b).find("unknown value type 77"), std::string::npos);
  }
  {
    auto b = full;
    const size_t key = find_bytes(b, "tokenizer.ggml.tokens");
    poke<uint64_t>(b, key + 21 + 4 + 4, 1ull << 50);  // array length
    EXPECT_NE(error_of(b).find("past the end"), std::string::npos);
  }
}

TEST(GgufCorrupt, MissingTensorKeyAndArchitecture) {
  const auto full = test::read_bytes(mixtral());
  {
    auto b = full;
    const InfoAt at = tensor_info(b, "output_norm.weight", 1);
    b[at.n_dims - 1] = 'X';  // rename to output_norm.weighX
    const std::string e = error_of(b, true);
    EXPECT_NE(e.find("missing tensor 'output_norm.weight'"), std::string::npos) << e;
  }
  {
    auto b = full;
    const size_t key = find_bytes(b, "llama.embedding_length");
    b[key] = 'x';
    const std::string e = error_of(b, true);
    EXPECT_NE(e.find("llama.embedding_length"), std::string::npos) << e;
  }
  {
    auto b = full;
    const size_t key = find_bytes(b, "general.architecture");
    // The value follows: type u32, length u64, then "llama".
    b[key + 20 + 4 + 8 + 4] = 'x';
    const std::string e = error_of(b, true);
    EXPECT_NE(e.find("unsupported architecture 'llamx'"), std::string::npos) << e;
    EXPECT_NE(e.find("qwen2moe"), std::string::npos) << e;
  }
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
  const auto full = test::read_bytes(mixtral());
  auto f = GgufFile::open(mixtral());
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> pos(0, f->data_offset() - 1);
  int errors = 0;
  for (int i = 0; i < 300; ++i) {
    auto b = full;
    for (int j = 0; j < 3; ++j) b[pos(rng)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    test::TempFile tmp;
    tmp.write(b);
    try {
      auto m = Model::load(tmp.path());
    } catch (const Error&) {
      ++errors;
    }
  }
  // Most flips land in token strings and are harmless; some must be caught.
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace sy
