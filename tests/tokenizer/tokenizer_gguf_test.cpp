// Tokenizers built from small hand-written vocabulary-only GGUF files: error messages for
// bad metadata, and the SPM / BPE algorithms on vocabularies small enough to reason about.
#include <gtest/gtest.h>

#include <unistd.h>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace sy::test {
namespace {

class TokenizerGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sy_tokenizer_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Tokenizer> load(const GgufVocabWriter& w, const std::string& name) {
    const std::string path = (dir_ / name).string();
    w.write(path);
    return Tokenizer::from_gguf(*GgufFile::open(path));
  }
  // The sy::Error message from loading, or "" when loading succeeds.
  std::string load_error(const GgufVocabWriter& w, const std::string& name) {
    try {
      load(w, name);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static GgufVocabWriter spm_vocab() {
    GgufVocabWriter w;
    w.set("tokenizer.ggml.model", std::string("llama"));
    // ids:                 0        1      2       3       4    5     6         7
    w.set("tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81",
                                                            "a", "b", "\xE2\x96\x81" "a", "ab"});
    w.set("tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -1, -2, -2, -3, -1});
    w.set("tokenizer.ggml.token_type", std::vector<int32_t>{2, 3, 3, 1, 1, 1, 1, 1});
    return w;
  }

  static GgufVocabWriter bpe_vocab(const std::string& pre) {
    GgufVocabWriter w;
    w.set("tokenizer.ggml.model", std::string("gpt2"));
    if (!pre.empty()) w.set("tokenizer.ggml.pre", pre);
    // ids:                 0    1    2          3     4     5           6
    w.set("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b", "\xC4\xA0", "ab", "bb",
                                                            "\xC4\xA0" "a", "<|endoftext|>"});
    w.set("tokenizer.ggml.token_type", std::vector<int32_t>{1, 1, 1, 1, 1, 1, 3});
    w.set("tokenizer.ggml.merges", std::vector<std::string>{"b b", "a b", "\xC4\xA0 a"});
    w.set("tokenizer.ggml.bos_token_id", uint32_t{6});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{6});
    return w;
  }

  std::filesystem::path dir_;
};

TEST_F(TokenizerGguf, BadModelIsAnError) {
  GgufVocabWriter bad;
  bad.set("tokenizer.ggml.model", std::string("bogus"));
  bad.set("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b"});
  const std::string msg = load_error(bad, "bogus.gguf");
  EXPECT_NE(msg.find("bogus.gguf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'bogus'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpt2"), std::string::npos) << msg;
}

TEST_F(TokenizerGguf, MissingKeysAreErrors) {
  GgufVocabWriter no_model;
  no_model.set("tokenizer.ggml.tokens", std::vector<std::string>{"a"});
  EXPECT_NE(load_error(no_model, "m.gguf").find("tokenizer.ggml.model"), std::string::npos);

  GgufVocabWriter no_tokens;
  no_tokens.set("tokenizer.ggml.model", std::string("llama"));
  EXPECT_NE(load_error(no_tokens, "t.gguf").find("tokenizer.ggml.tokens"), std::string::npos);

  GgufVocabWriter no_merges;
  no_merges.set("tokenizer.ggml.model", std::string("gpt2"));
  no_merges.set("tokenizer.ggml.tokens", std::vector<std::string>{"a"});
  EXPECT_NE(load_error(no_merges, "g.gguf").find("tokenizer.ggml.merges"), std::string::npos);

  const std::string pre = load_error(bpe_vocab("nonsense"), "p.gguf");
  EXPECT_NE(pre.find("tokenizer.ggml.pre 'nonsense'"), std::string::npos) << pre;
  EXPECT_NE(pre.find("qwen2"), std::string::npos) << pre;

  GgufVocabWriter dup2;
  dup2.set("tokenizer.ggml.model", std::string("llama"));
  dup2.set("tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "x", "x"});
  EXPECT_NE(load_error(dup2, "d.gguf").find("duplicate token"), std::string::npos);
}

TEST_F(TokenizerGguf, SpmMergesByScoreAndFallsBackToUnk) {
  const auto t = load(spm_vocab(), "spm.gguf");
  EXPECT_EQ(t->bos_id(), 1);  // llama.cpp's SPM defaults when the keys are absent
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_TRUE(t->add_bos_default());
  // "▁ab": "ab" (-1) beats "▁a" (-3), leaving "▁" + "ab".
  EXPECT_EQ(t->encode("ab", false, false), (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(t->encode("a", true, false), (std::vector<int32_t>{1, 6}));
  // No byte tokens and no "c": UNK, as the brief asks (llama.cpp would throw).
  EXPECT_EQ(t->encode("c", false, false), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(t->decode({3, 7}), "ab");
}

// tokenizer.ggml.add_eos_token: EOS goes at the end when the caller adds the special
// tokens, as llama.cpp's tokenize does; the vocabularies that set it need it.
TEST_F(TokenizerGguf, AddEosTokenAppendsEos) {
  EXPECT_FALSE(load(spm_vocab(), "plain.gguf")->add_eos_default());
  GgufVocabWriter w = spm_vocab();
  w.set("tokenizer.ggml.add_eos_token", true);
  const auto t = load(w, "eos.gguf");
  ASSERT_TRUE(t->add_eos_default());
  EXPECT_EQ(t->encode("a", t->add_bos_default(), false, t->add_eos_default()), (std::vector<int32_t>{1, 6, 2}));
  EXPECT_EQ(t->encode("a", false, false), (std::vector<int32_t>{6}));
}

TEST_F(TokenizerGguf, BpeMergesByRank) {
  const auto t = load(bpe_vocab(""), "bpe.gguf");
  EXPECT_EQ(t->pre_name(), "default");
  EXPECT_EQ(t->bos_id(), 6);
  EXPECT_FALSE(t->add_bos_default());
  EXPECT_TRUE(t->is_eog(6));
  // "abb": "b b" (rank 0) merges before "a b" (rank 1).
  EXPECT_EQ(t->encode("abb", false, false), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(t->encode("ab a", false, false), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(t->encode("ab<|endoftext|>", false, true), (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(t->decode({3, 5}), "ab a");
}

}  // namespace
}  // namespace sy::test
