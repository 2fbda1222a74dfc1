// Perplexity of the bundled default model on the validation text with -c 256, against
// llama.cpp's recorded figure (71.646), within 1%.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/perplexity.h"
#include "support/shared_data.h"

namespace sy {
namespace {

TEST(Perplexity, DefaultModelMatchesLlamaCpp) {
  const auto cases = nlohmann::json::parse(test::read_text_file(test::shared_path("models/tiny-mixtral/cases.json")));
  const double want = cases["perplexity"]["llama_cpp_ppl"];
  auto model = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf");
  std::string text = test::read_text_file(test::shared_path("models/tiny-mixtral/valid.txt"));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  const auto tokens = model->tokenizer().encode(text, true, false);
  ThreadPool pool(ThreadPool::default_threads());
  const PerplexityResult r = perplexity(*model, tokens, 256, pool);
  EXPECT_EQ(r.n_chunks, 232);
  EXPECT_EQ(r.n_scored, 29464);
  EXPECT_NEAR(r.ppl, want, 0.01 * want);
  RecordProperty("ppl", std::to_string(r.ppl));
}

}  // namespace
}  // namespace sy
