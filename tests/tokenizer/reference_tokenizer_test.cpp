// Tokenizers against implementations nobody here wrote, on random mixed-script text
// (tests/tokenizer/reference_tokenizer_check.py): Google's sentencepiece for the LLaMA SPM
// vocabulary, Hugging Face tokenizers for GPT-2's byte-level BPE, both built from the
// vocabulary files' own pieces, scores and merges. Skipped when the Python packages are
// missing (scripts/install-deps installs them when pip is available). Not named Tokenizer*
// so that the ASan/UBSan pass, which builds only the parser tests, leaves it out.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/run_cli.h"
#include "tokenizer_test_util.h"

namespace sy::test {
namespace {

void check_against_reference(const std::string& python_modules, const std::string& vocab_name) {
  if (std::system(("python3 -c 'import " + python_modules + "' > /dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "the Python packages " << python_modules << " are not installed";
  }
  const std::string vocab = vocab_path(vocab_name);
  const CliRun r =
      run_command("python3 " + std::string(SY_SOURCE_DIR) + "/tests/tokenizer/reference_tokenizer_check.py " +
                  SY_CLI_PATH + " " + vocab + " 200 7");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("200 of 200 texts tokenize identically"), std::string::npos) << r.out;
}

TEST(ReferenceTokenizers, LlamaSpmMatchesSentencePiece) {
  check_against_reference("sentencepiece, google.protobuf, gguf", "llama-spm");
}

TEST(ReferenceTokenizers, GptTwoByteLevelBpeMatchesHuggingFaceTokenizers) {
  check_against_reference("tokenizers, gguf", "gpt-2");
}

}  // namespace
}  // namespace sy::test
