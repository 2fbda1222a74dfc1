// `switchyard pack` writes a copy whose Q4_0 / Q8_0 matrices are in the kernels' packed
// layout: the copy gives the source's logits, keeps every other byte and key, and the
// command refuses inputs it cannot pack with a message that says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/weight_prep.h"
#include "model/model.h"
#include "model/packed_file.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "support/temp_file.h"

namespace sy {
namespace {

std::vector<float> logits(const std::string& path, const std::vector<int32_t>& prompt) {
  auto m = Model::load(path);
  ThreadPool pool(2);
  Session s(*m, pool, 64);
  s.eval(prompt, true);
  const int64_t nv = m->hparams().n_vocab;
  std::vector<float> out(s.logits(0), s.logits(0) + prompt.size() * nv);
  s.eval({static_cast<int32_t>(std::max_element(out.end() - nv, out.end()) - (out.end() - nv))});
  out.insert(out.end(), s.logits(0), s.logits(0) + nv);
  return out;
}

void write_model(const std::string& path, const std::string& arch, DType type) {
  SynthOptions o;
  o.shape = synth_preset("tiny").shape;
  o.shape.arch = arch;
  o.shape.n_embd = 512;  // two groups per row: one group pair
  o.shape.n_head = 4;
  o.shape.n_head_kv = 4;
  o.shape.n_ff = 768;  // the down projection: a pair and an odd group
  if (arch == "qwen2moe") o.shape.n_ff_shexp = 512;
  o.shape.n_expert = 8;
  o.shape.n_expert_used = 2;
  o.type = type;
  ThreadPool pool(2);
  write_synth_model(path, o, pool);
}

class PackedFile : public ::testing::TestWithParam<std::pair<std::string, DType>> {};

TEST_P(PackedFile, SameLogitsAndBytesAsTheSource) {
  const auto [arch, type] = GetParam();
  test::TempFile src, dst;
  write_model(src.path(), arch, type);
  ThreadPool pool(2);
  const PackStats st = write_packed_model(src.path(), dst.path(), pool);

  auto a = GgufFile::open(src.path());
  auto b = GgufFile::open(dst.path());
  ASSERT_EQ(a->metadata().size(), b->metadata().size());
  for (const auto& [key, value] : a->metadata()) {
    ASSERT_NE(b->find(key), nullptr) << key;
    EXPECT_EQ(b->find(key)->to_string(100000), value.to_string(100000)) << key;
  }
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  int64_t packed = 0;
  for (const GgufTensorInfo& t : a->tensors()) {
    const GgufTensorInfo& u = b->tensor(t.name);
    EXPECT_EQ(u.shape, t.shape) << t.name;
    EXPECT_EQ(u.dtype, t.dtype) << t.name;
    ASSERT_EQ(u.n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(u.packed, packs_tensor(t)) << t.name;
    if (!u.packed) {
      EXPECT_EQ(std::memcmp(u.data, t.data, t.n_bytes), 0) << t.name;
      continue;
    }
    ++packed;
    // Every row is the packing of the source row, and dequantizes to the same values.
    const int64_t cols = t.shape[0], rows = t.n_elements() / cols;
    const size_t rb = dtype_row_bytes(t.dtype, cols);
    std::vector<uint8_t> want(rb);
    std::vector<float> x(cols), y(cols);
    for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
      cpu::pack_row(t.dtype, t.data + r * rb, want.data(), cols);
      EXPECT_EQ(std::memcmp(u.data + r * rb, want.data(), rb), 0) << t.name << " row " << r;
      cpu::weight_row_to_f32(WeightMatrix{t.dtype, rows, cols, t.data, t.name, false}, r, x.data());
      cpu::weight_row_to_f32(WeightMatrix{u.dtype, rows, cols, u.data, u.name, true}, r, y.data());
      EXPECT_EQ(x, y) << t.name << " row " << r;
    }
  }
  EXPECT_GT(packed, 0);
  EXPECT_EQ(st.packed, packed);
  EXPECT_EQ(st.tensors, static_cast<int64_t>(a->tensors().size()));
  EXPECT_EQ(st.file_bytes, b->file_size());

  const std::vector<int32_t> prompt = {5, 77, 300, 12, 9, 140};
  const std::vector<float> want = logits(src.path(), prompt), got = logits(dst.path(), prompt);
  ASSERT_EQ(got.size(), want.size());
  if (cpu::packing_enabled()) {
    EXPECT_EQ(got, want);  // the source is packed at load into the same layout
  } else {
    // The source runs GGUF-layout dots, the copy the scalar packed kernels: the same
    // integer sums, the block scales applied in another order.
    float range = 0, diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      range = std::max(range, std::fabs(want[i]));
      diff = std::max(diff, std::fabs(got[i] - want[i]));
    }
    EXPECT_LE(diff, 1e-4f * range);
  }
}

// Load checks the bytes it will copy into anonymous memory against the memory available
// before it copies them: the estimate must be exactly what it then copies.
TEST_P(PackedFile, LoadCopiesTheBytesItCheckedFor) {
  const auto [arch, type] = GetParam();
  test::TempFile src;
  write_model(src.path(), arch, type);
  auto m = Model::load(src.path());
  EXPECT_EQ(m->copied_weight_bytes(true), m->copied_bytes());
  if (cpu::packing_enabled()) {
    EXPECT_GE(m->copied_bytes(), m->all_expert_bytes());  // every routed expert, and more
  } else {
    EXPECT_EQ(m->copied_bytes(), 0u);
  }
  ModelOptions cached;
  cached.expert_cache = "50%";
  auto c = Model::load(src.path(), cached);
  EXPECT_EQ(c->copied_weight_bytes(false), c->copied_bytes());
  if (cpu::packing_enabled()) {
    EXPECT_EQ(c->copied_bytes() + m->all_expert_bytes(), m->copied_bytes());
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedFile,
                         ::testing::Values(std::make_pair(std::string("olmoe"), DType::Q4_0),
                                           std::make_pair(std::string("qwen2moe"), DType::Q8_0)),
                         [](const auto& info) { return info.param.first + "_" + dtype_name(info.param.second); });

std::string error_of(const std::string& in, const std::string& out) {
  ThreadPool pool(1);
  try {
    write_packed_model(in, out, pool);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PackedFileErrors, NamesWhyNothingWasWritten) {
  test::TempFile q4, packed, f16, out;
  write_model(q4.path(), "olmoe", DType::Q4_0);
  write_model(f16.path(), "olmoe", DType::F16);
  ThreadPool pool(1);
  write_packed_model(q4.path(), packed.path(), pool);
  EXPECT_NE(error_of(q4.path(), q4.path()).find("is the input file"), std::string::npos);
  EXPECT_NE(error_of(packed.path(), out.path()).find("packed already"), std::string::npos);
  EXPECT_NE(error_of(f16.path(), out.path()).find("no Q4_0 or Q8_0 weight matrices"), std::string::npos);
  EXPECT_NE(error_of(out.path() + ".missing", out.path()).find(".missing"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out.path()));
}

}  // namespace
}  // namespace sy
