// Every case recorded from llama.cpp in shared/fixtures/*/cases.json and
// shared/models/tiny-mixtral/cases.json: logits rows, top-10 lists at every position and
// the 16 greedy tokens by incremental decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "support/greedy.h"
#include "support/shared_data.h"

namespace sy {
namespace {

using nlohmann::json;

struct CaseRef {
  std::string dir;    // under shared/
  size_t index = 0;
};

// Tolerance on |ours - llama.cpp| relative to the row's max |logit|:
//  - F32 models: 1e-3, as the issue states (both sides compute in float32).
//  - F16 weights: 1e-3 too. Like llama.cpp we round activations to F16 before each F16
//    dot product, and that rounding magnifies sum-order differences; on these cases < 4e-4 of
//    their range (the model README measures llama.cpp vs float64 within 0.0045 of 23).
//  - Q8_0 / Q4_0 weights: 1e-3 too: like llama.cpp we quantize activations to Q8_0 and
//    use integer dot products, so only accumulation order differs.
constexpr double kRelTol = 1e-3;

std::map<std::string, std::shared_ptr<Model>>& model_cache() {
  static std::map<std::string, std::shared_ptr<Model>> cache;
  return cache;
}

std::shared_ptr<Model> load(const std::string& path) {
  auto& c = model_cache();
  auto it = c.find(path);
  if (it != c.end()) return it->second;
  return c[path] = Model::load(path);
}

// Also called while the suite is instantiated: a missing file stops the binary with its
// name instead of a JSON parse error.
json load_cases(const std::string& dir) {
  return json::parse(test::read_text_file(test::required_shared_path(dir + "/cases.json")));
}

void PrintTo(const CaseRef& c, std::ostream* os) { *os << c.dir << " case " << c.index; }

class FixtureCase : public ::testing::TestWithParam<CaseRef> {};

TEST_P(FixtureCase, MatchesLlamaCpp) {
  const CaseRef ref = GetParam();
  const json all = load_cases(ref.dir);
  const json& c = all["cases"][ref.index];
  const std::string model_file = c.value("model", all["model"].get<std::string>());
  auto model = load(test::shared_path(ref.dir + "/" + model_file));
  const auto tokens = c["tokens"].get<std::vector<int32_t>>();
  const int64_t n_vocab = c["n_vocab"];
  ASSERT_EQ(model->hparams().n_vocab, n_vocab);

  if (!c["prompt"].is_null()) {
    EXPECT_EQ(model->tokenizer().encode(c["prompt"].get<std::string>(), c["add_bos"].get<bool>(), false), tokens)
        << "tokenization of the prompt differs";
  }

  ThreadPool pool(2);
  Session s(*model, pool, all.value("n_ctx", 512));
  s.eval(tokens, /*all_logits=*/true);

  // Stored rows.
  const auto positions = c["logits_positions"].get<std::vector<int64_t>>();
  const auto ref_logits = test::read_f32_file(test::shared_path(ref.dir + "/" + c["logits_file"].get<std::string>()));
  ASSERT_EQ(ref_logits.size(), positions.size() * n_vocab);
  double worst = 0;
  for (size_t r = 0; r < positions.size(); ++r) {
    const float* want = ref_logits.data() + r * n_vocab;
    const float* got = s.logits(positions[r]);
    double max_ref = 0, max_diff = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(want[i])));
      max_diff = std::max(max_diff, std::fabs(double(want[i]) - got[i]));
    }
    worst = std::max(worst, max_diff / max_ref);
    EXPECT_LE(max_diff, kRelTol * max_ref) << "position " << positions[r];
  }
  RecordProperty("max_rel_diff", std::to_string(worst));

  // Top-10 at every position: each listed logit matches, and top-1 agrees wherever the
  // reference's top-2 margin exceeds the tolerance.
  if (c.contains("top_ids")) {
    for (size_t p = 0; p < tokens.size(); ++p) {
      const auto ids = c["top_ids"][p].get<std::vector<int32_t>>();
      const auto vals = c["top_logits"][p].get<std::vector<float>>();
      const float* got = s.logits(p);
      const double tol = kRelTol * std::fabs(vals[0]);
      for (size_t j = 0; j < ids.size(); ++j) {
        EXPECT_NEAR(got[ids[j]], vals[j], tol) << "position " << p << " rank " << j;
      }
      if (vals[0] - vals[1] > 2 * tol) {
        EXPECT_EQ(argmax(got, n_vocab), ids[0]) << "position " << p;
      }
    }
  }

  // Greedy continuation, one token at a time through the KV cache.
  const auto expected = c["greedy_next"].get<std::vector<int32_t>>();
  EXPECT_EQ(test::greedy_continuation(*model, pool, all.value("n_ctx", 512), tokens, expected.size()), expected);
}

std::vector<CaseRef> all_cases() {
  std::vector<CaseRef> out;
  for (std::string dir : {"fixtures/mixtral", "fixtures/qwen2moe", "fixtures/olmoe", "fixtures/qwen3moe", "models/tiny-mixtral"}) {
    const json all = load_cases(dir);
    for (size_t i = 0; i < all["cases"].size(); ++i) out.push_back({dir, i});
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<CaseRef>& info) {
  const json all = load_cases(info.param.dir);
  const json& c = all["cases"][info.param.index];
  std::string model = c.value("model", all["model"].get<std::string>());
  std::string n = info.param.dir.substr(info.param.dir.find('/') + 1) + "_" + model + "_" + c["name"].get<std::string>();
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n + "_" + std::to_string(info.param.index);
}

INSTANTIATE_TEST_SUITE_P(Llama, FixtureCase, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace sy
