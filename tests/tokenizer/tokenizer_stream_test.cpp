// StreamDecoder: only complete UTF-8 leaves it, whatever the token boundaries.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace sy::test {
namespace {

// True when s holds only whole UTF-8 sequences.
bool whole_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string stream_all(const Tokenizer& t, const std::vector<int32_t>& ids,
                       std::vector<std::string>* parts = nullptr) {
  StreamDecoder d(t);
  std::string out;
  for (int32_t id : ids) {
    std::string s = d.push(id);
    if (parts) parts->push_back(s);
    out += s;
  }
  return out + d.flush();
}

// "😁" has no token of its own in GPT-2: its four bytes arrive in several tokens.
TEST(TokenizerStream, ReassemblesSplitCharacterGpt2) {
  const Tokenizer& t = vocab_tokenizer("gpt-2");
  const std::string emoji = "\xF0\x9F\x98\x81";
  const std::vector<int32_t> ids = t.encode(emoji, false, false);
  ASSERT_GT(ids.size(), 1u);
  std::vector<std::string> parts;
  EXPECT_EQ(stream_all(t, ids, &parts), emoji);
  for (size_t i = 0; i + 1 < parts.size(); ++i) EXPECT_EQ(parts[i], "") << "part " << i;
  EXPECT_EQ(parts.back(), emoji);
}

// SPM byte fallback: "🦙" is four <0xXX> tokens.
TEST(TokenizerStream, ReassemblesByteFallbackSpm) {
  const Tokenizer& t = vocab_tokenizer("llama-spm");
  const std::string text = "a \xF0\x9F\xA6\x99 b";
  const std::vector<int32_t> ids = t.encode(text, false, false);
  std::vector<std::string> parts;
  EXPECT_EQ(stream_all(t, ids, &parts), " " + text);  // pieces joined as they are
  for (const std::string& p : parts) EXPECT_TRUE(whole_utf8(p)) << "part '" << p << "'";
}

TEST(TokenizerStream, SkipsControlTokensAndFlushesIncompleteTail) {
  const Tokenizer& t = vocab_tokenizer("llama-spm");
  StreamDecoder d(t);
  EXPECT_EQ(d.push(1), "");  // BOS adds nothing
  const int32_t f0 = t.encode("\xF0", false, false).back();  // <0xF0>
  EXPECT_EQ(t.token_text(f0), "<0xF0>");
  EXPECT_EQ(d.push(f0), "");
  EXPECT_EQ(d.flush(), "\xF0");
  EXPECT_EQ(d.flush(), "");
}

TEST(TokenizerStream, MatchesDecodeOnFixtureTexts) {
  const Tokenizer& t = vocab_tokenizer("gpt-neox");
  const std::string text = "Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3";
  const std::vector<int32_t> ids = t.encode(text, false, false);
  EXPECT_EQ(stream_all(t, ids), text);
}

}  // namespace
}  // namespace sy::test
