// Token ids must equal llama.cpp's exactly: the vocabulary test files (llama.cpp's own
// test-tokenizer-0 inputs) and the prompts of every model's cases.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace sy::test {
namespace {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Inputs are separated by "\n__ggml_vocab_test__\n"; the .out file has one line of ids
// per input.
std::vector<VocabCase> load_vocab_cases(const std::string& name) {
  const std::string inp = read_text(vocab_path(name) + ".inp");
  const std::string out = read_text(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0;;) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= cases.size()) throw std::runtime_error(name + ".out has more lines than inputs");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
    ++i;
  }
  if (i != cases.size()) throw std::runtime_error(name + ".out has fewer lines than inputs");
  return cases;
}

class TokenizerFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixtures, EveryLineMatchesLlamaCpp) {
  const Tokenizer& tok = vocab_tokenizer(GetParam());
  const std::vector<VocabCase> cases = load_vocab_cases(GetParam());
  ASSERT_GT(cases.size(), 40u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].text, false, false);
    EXPECT_EQ(got, cases[i].ids) << GetParam() << " input #" << i << ": '" << cases[i].text
                                 << "'";
    passed += got == cases[i].ids;
  }
  std::cout << "[          ] " << GetParam() << ": " << passed << "/" << cases.size()
            << " fixture lines match\n";
}

// Pieces are lossless: concatenated, they give the input back (SPM adds one leading
// space). decode() equals the input too unless llama.cpp's BPE clean-up applies.
TEST_P(TokenizerFixtures, PiecesRoundTrip) {
  const Tokenizer& tok = vocab_tokenizer(GetParam());
  for (const VocabCase& c : load_vocab_cases(GetParam())) {
    const std::vector<int32_t> ids = tok.encode(c.text, false, false);
    std::string joined;
    for (int32_t id : ids) joined += tok.token_to_piece(id);
    const bool spm = tok.model_name() == "llama";
    EXPECT_EQ(joined, (spm && !c.text.empty() ? " " : "") + c.text);
    const bool cleaned = !spm && (c.text.find(" ?") != std::string::npos ||
                                  c.text.find(" !") != std::string::npos ||
                                  c.text.find(" .") != std::string::npos ||
                                  c.text.find(" ,") != std::string::npos ||
                                  c.text.find(" '") != std::string::npos);
    if (!cleaned) {
      EXPECT_EQ(tok.decode(ids), c.text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerFixtures,
                         ::testing::Values("llama-spm", "gpt-2", "gpt-neox"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

class TokenizerCases : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerCases, PromptsEncodeToReferenceTokens) {
  const std::filesystem::path dir = std::filesystem::path(shared_dir()) / GetParam();
  const nlohmann::json j = nlohmann::json::parse(read_text(dir / "cases.json"));
  // Cases may name their own model file (mixtral's quantized copies share the vocabulary).
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  size_t checked = 0;
  for (const auto& c : j.at("cases")) {
    if (c.at("prompt").is_null()) continue;
    const std::string file = c.value("model", j.at("model").get<std::string>());
    auto& tok = tokenizers[file];
    if (!tok) tok = Tokenizer::from_gguf(*GgufFile::open((dir / file).string()));
    const std::string prompt = c.at("prompt").get<std::string>();
    const bool add_bos = c.at("add_bos").get<bool>();
    const auto expected = c.at("tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(add_bos, tok->add_bos_default()) << c.at("name");
    const std::vector<int32_t> ids = tok->encode(prompt, add_bos, false);
    EXPECT_EQ(ids, expected) << GetParam() << " case " << c.at("name");
    // Round trip; with BOS, SPM keeps the prefix space as llama.cpp does.
    const bool spm_bos = add_bos && tok->model_name() == "llama";
    EXPECT_EQ(tok->decode(ids), (spm_bos ? " " : "") + prompt) << c.at("name");
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerCases,
                         ::testing::Values("fixtures/mixtral", "fixtures/olmoe",
                                           "fixtures/qwen2moe", "fixtures/qwen3moe",
                                           "models/tiny-mixtral"),
                         [](const auto& info) {
                           const std::string& p = info.param;
                           std::string n = p.substr(p.find('/') + 1);
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace
}  // namespace sy::test
