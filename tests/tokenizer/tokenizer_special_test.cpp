// Special tokens, BOS/EOS metadata, pieces and decoding details.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace sy::test {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(TokenizerSpecial, SpmMetadata) {
  const Tokenizer& t = vocab_tokenizer("llama-spm");
  EXPECT_EQ(t.model_name(), "llama");
  EXPECT_EQ(t.pre_name(), "default");
  EXPECT_EQ(t.n_vocab(), 32000);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.add_bos_default());
  EXPECT_FALSE(t.add_eos_default());
  EXPECT_TRUE(t.is_eog(2));
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_TRUE(t.is_control(1));
  EXPECT_FALSE(t.is_control(100));
  EXPECT_EQ(t.token_text(1), "<s>");
}

TEST(TokenizerSpecial, Gpt2Metadata) {
  const Tokenizer& t = vocab_tokenizer("gpt-2");
  EXPECT_EQ(t.model_name(), "gpt2");
  EXPECT_EQ(t.pre_name(), "gpt-2");
  EXPECT_EQ(t.bos_id(), 50256);
  EXPECT_FALSE(t.add_bos_default());
  EXPECT_TRUE(t.is_eog(50256));
  EXPECT_TRUE(t.is_control(50256));
  // gpt-neox has no tokenizer.ggml.pre: llama.cpp's default pre-tokenizer.
  EXPECT_EQ(vocab_tokenizer("gpt-neox").pre_name(), "default");
}

TEST(TokenizerSpecial, ParseSpecialSpm) {
  const Tokenizer& t = vocab_tokenizer("llama-spm");
  // The text after a special token gets the SPM space prefix again, as in llama.cpp.
  EXPECT_EQ(t.encode("<s>Hello", false, true), concat({1}, t.encode("Hello", false, false)));
  EXPECT_EQ(t.encode("Hi</s>", true, true), concat(t.encode("Hi", true, false), {2}));
  const std::vector<int32_t> plain = t.encode("<s>Hello", false, false);
  EXPECT_FALSE(contains(plain, 1));
  EXPECT_EQ(t.decode(plain), "<s>Hello");
  EXPECT_EQ(t.encode("<s>", false, true), std::vector<int32_t>{1});
}

TEST(TokenizerSpecial, ParseSpecialGpt2) {
  const Tokenizer& t = vocab_tokenizer("gpt-2");
  const std::vector<int32_t> hello = t.encode("Hello", false, false);
  EXPECT_EQ(t.encode("Hello<|endoftext|>", false, true), concat(hello, {50256}));
  EXPECT_EQ(t.encode("<|endoftext|>Hello", false, true), concat({50256}, hello));
  const std::vector<int32_t> plain = t.encode("Hello<|endoftext|>", false, false);
  EXPECT_FALSE(contains(plain, 50256));
  EXPECT_EQ(t.decode(plain), "Hello<|endoftext|>");
}

// User-defined tokens are cut out even without parse_special (gpt-neox's runs of spaces).
TEST(TokenizerSpecial, UserDefinedTokensAlwaysMatch) {
  const Tokenizer& t = vocab_tokenizer("gpt-neox");
  const std::vector<int32_t> ids = t.encode("a    b", false, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
    return t.token_text(id) == "    " || t.token_text(id) == "   ";
  }));
  EXPECT_EQ(t.decode(ids), "a    b");
}

TEST(TokenizerSpecial, BosIsPrepended) {
  const Tokenizer& t = vocab_tokenizer("llama-spm");
  EXPECT_EQ(t.encode("", true, false), std::vector<int32_t>{1});
  EXPECT_TRUE(t.encode("", false, false).empty());
  const Tokenizer& g = vocab_tokenizer("gpt-2");
  EXPECT_EQ(g.encode("Hi", true, false), concat({50256}, g.encode("Hi", false, false)));
}

TEST(TokenizerSpecial, Pieces) {
  const Tokenizer& spm = vocab_tokenizer("llama-spm");
  EXPECT_EQ(spm.token_to_piece(13), "\n");  // <0x0A>, a byte-fallback token
  EXPECT_EQ(spm.token_text(13), "<0x0A>");
  const std::vector<int32_t> hello = spm.encode("Hello", false, false);
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(spm.token_to_piece(hello[0]), " Hello");  // U+2581 -> space
  EXPECT_EQ(spm.token_to_piece(1), "<s>");           // control tokens render their text...
  EXPECT_EQ(spm.decode({1, 2}), "");                 // ...but decode hides them

  const Tokenizer& gpt2 = vocab_tokenizer("gpt-2");
  const std::vector<int32_t> world = gpt2.encode(" world", false, false);
  ASSERT_EQ(world.size(), 1u);
  EXPECT_EQ(gpt2.token_text(world[0]), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(gpt2.token_to_piece(world[0]), " world");
  EXPECT_THROW(gpt2.token_to_piece(50257), Error);
  EXPECT_THROW(gpt2.decode({-1}), Error);
}

TEST(TokenizerSpecial, DecodeFollowsLlamaCpp) {
  const Tokenizer& spm = vocab_tokenizer("llama-spm");
  // The first token loses its leading space; after BOS the space stays (llama.cpp).
  EXPECT_EQ(spm.decode(spm.encode("Hello world", false, false)), "Hello world");
  EXPECT_EQ(spm.decode(spm.encode("Hello world", true, false)), " Hello world");
  // Byte-level BPE vocabularies clean up spaces before punctuation, like HF and llama.cpp.
  const Tokenizer& gpt2 = vocab_tokenizer("gpt-2");
  EXPECT_EQ(gpt2.decode(gpt2.encode("Hello , world ! I 'm here .", false, false)),
            "Hello, world! I'm here.");
  EXPECT_EQ(gpt2.decode(gpt2.encode("it ' s", false, false)), "it's");
}

}  // namespace
}  // namespace sy::test
