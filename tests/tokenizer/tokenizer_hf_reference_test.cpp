// Byte-level BPE against a tokenizer nobody here wrote: Hugging Face `tokenizers`, built from
// the GPT-2 vocabulary file's own vocab and merges, on random mixed-script text
// (tests/tokenizer/hf_tokenizers_check.py). Skipped when the Python packages are missing
// (scripts/install-deps installs them when pip is available). Not named Tokenizer* so
// that the ASan/UBSan pass, which builds only the parser tests, leaves it out.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/shared_data.h"

namespace sy::test {
namespace {

TEST(HfTokenizersReference, GptTwoByteLevelBpeMatchesOnRandomText) {
  if (std::system("python3 -c 'import tokenizers, gguf' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the tokenizers and gguf Python packages are not installed";
  }
  const std::string vocab = shared_path("fixtures/tokenizers/ggml-vocab-gpt-2.gguf");
  const std::string cmd = "python3 " + std::string(SY_SOURCE_DIR) + "/tests/tokenizer/hf_tokenizers_check.py " +
                          SY_CLI_PATH + " " + vocab + " 200 7 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("200 of 200 texts tokenize identically"), std::string::npos) << out;
}

}  // namespace
}  // namespace sy::test
