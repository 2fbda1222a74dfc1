// Reduced-precision KV caches on the trained default model: logits stay within a small
// tolerance of llama.cpp's (recorded with an f32 cache), greedy decoding through the cache
// agrees with the reference, and q8_0 is refused for heads that are not whole blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "support/greedy.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

using nlohmann::json;

struct KvCase {
  DType type;
  // Largest |ours - reference| relative to the row's max |logit|. f16 keeps 11 significant
  // bits (~5e-4 relative per cached value); q8_0 keeps 8 bits against each block's largest
  // value (~4e-3 per value), measured here at 1.1e-2.
  double rel_tol;
};

class KvCacheTypes : public ::testing::TestWithParam<KvCase> {};

TEST_P(KvCacheTypes, TrainedModelStaysCloseToTheF32Reference) {
  const KvCase kc = GetParam();
  const std::string dir = "models/tiny-mixtral";
  const json all = json::parse(test::read_text_file(test::shared_path(dir + "/cases.json")));
  ModelOptions opt;
  opt.kv_type = kc.type;
  auto model = Model::load(test::shared_path(dir + "/" + all["model"].get<std::string>()), opt);
  ThreadPool pool(2);
  double worst = 0;
  for (const json& c : all["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    const int64_t n_vocab = c["n_vocab"];
    Session s(*model, pool, all.value("n_ctx", 512));
    ASSERT_EQ(s.cache().type(), kc.type);
    s.eval(tokens, /*all_logits=*/true);
    const auto positions = c["logits_positions"].get<std::vector<int64_t>>();
    const auto ref = test::read_f32_file(test::shared_path(dir + "/" + c["logits_file"].get<std::string>()));
    for (size_t r = 0; r < positions.size(); ++r) {
      double max_ref = 0, max_diff = 0;
      for (int64_t i = 0; i < n_vocab; ++i) {
        max_ref = std::max(max_ref, std::fabs(double(ref[r * n_vocab + i])));
        max_diff = std::max(max_diff, std::fabs(double(ref[r * n_vocab + i]) - s.logits(positions[r])[i]));
      }
      worst = std::max(worst, max_diff / max_ref);
      EXPECT_LE(max_diff, kc.rel_tol * max_ref) << "position " << positions[r];
    }
    // Greedy continuation one token at a time through the cache.
    const auto expected = c["greedy_next"].get<std::vector<int32_t>>();
    EXPECT_EQ(test::greedy_continuation(*model, pool, all.value("n_ctx", 512), tokens, expected.size()), expected)
        << c["name"];
  }
  std::printf("%s cache: worst relative logit difference %.2e\n", dtype_name(kc.type).c_str(), worst);
  RecordProperty("max_rel_diff", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTypes, ::testing::Values(KvCase{DType::F16, 1e-2}, KvCase{DType::Q8_0, 2e-2}),
                         [](const ::testing::TestParamInfo<KvCase>& i) { return dtype_name(i.param.type); });

TEST(KvCacheQ8, RefusedForHeadsThatAreNotWholeBlocks) {
  SynthOptions o;
  o.shape = synth_preset("tiny").shape;
  o.shape.n_embd = 64;
  o.shape.n_head = 4;  // heads of 16 values
  o.shape.n_head_kv = 4;
  o.type = DType::F32;
  test::TempFile f;
  ThreadPool pool(2);
  write_synth_model(f.path(), o, pool);
  ModelOptions opt;
  opt.kv_type = DType::Q8_0;
  try {
    Model::load(f.path(), opt);
    FAIL() << "q8_0 accepted for heads of 16 values";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use f16 or f32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sy
