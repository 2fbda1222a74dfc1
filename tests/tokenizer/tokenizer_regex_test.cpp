// The PCRE2 splitter against two independent references on random text:
//  - std::regex / std::wregex run the way llama.cpp's fallback runs them (collapsed text
//    for regexes with Unicode categories, codepoints otherwise);
//  - the rules of llama.cpp's hand-written gpt-2 and llama3 splitters, re-stated here.
// The alphabet mixes ASCII with non-ASCII letters, numbers, punctuation, symbols, marks,
// White_Space and format characters, whose categories are listed by hand.
#include <gtest/gtest.h>

#include <random>
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex> under the sanitizers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

#include "tokenizer/pretokenizer.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/unicode.h"

namespace sy {
namespace {

// Non-ASCII test characters and their collapsed class byte (see regex_split.h).
const std::vector<std::pair<uint32_t, char>> kExtra = {
    {0xE9, '\xD2'},    {0x411, '\xD2'},   {0x4E2D, '\xD2'},  {0x1F0, '\xD2'},   // letters
    {0xBD, '\xD1'},    {0x663, '\xD1'},   {0x2163, '\xD1'},                      // numbers
    {0x3002, '\xD3'},  {0xAB, '\xD3'},    {0x2014, '\xD3'},                      // punctuation
    {0x20AC, '\xD5'},  {0x1F601, '\xD5'}, {0xFFFD, '\xD5'},                      // symbols
    {0x301, '\xD4'},                                                             // mark
    {0xA0, '\x0B'},    {0x3000, '\x0B'},  {0x85, '\x0B'},    {0x2028, '\x0B'},   // White_Space
    {0x200B, '\xD0'},  {0x80, '\xD0'},    {0xE000, '\xD0'},                      // Cf, Cc, Co
};

char collapsed_of(uint32_t c) {
  if (c < 128) return static_cast<char>(c);
  for (const auto& [cpt, cls] : kExtra) {
    if (cpt == c) return cls;
  }
  ADD_FAILURE() << "no class for U+" << std::hex << c;
  return '\xD0';
}

std::u32string random_text(std::mt19937& rng) {
  static const std::u32string kAscii =
      U"aZ09 \t\n\r\v'sStTmMdDlLrReEvV!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\x01";
  std::u32string s;
  const size_t n = rng() % 24;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = rng() % 100;
    if (r < 25) {
      s += U" ";
    } else if (r < 70) {
      s += kAscii[rng() % kAscii.size()];
    } else {
      s += static_cast<char32_t>(kExtra[rng() % kExtra.size()].first);
    }
  }
  return s;
}

std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) unicode::append_utf8(out, c);
  return out;
}

// llama.cpp's way of running a regex over pieces with std::regex_iterator, keeping the
// text between matches as pieces.
template <typename CharT>
std::vector<size_t> std_split(const std::basic_string<CharT>& text,
                              const std::basic_regex<CharT>& rx,
                              const std::vector<size_t>& pieces) {
  std::vector<size_t> out;
  size_t start = 0;
  for (size_t len : pieces) {
    using It = std::regex_iterator<const CharT*>;
    size_t last = 0;
    for (It it(text.data() + start, text.data() + start + len, rx), end; it != end; ++it) {
      const auto pos = static_cast<size_t>(it->position());
      if (pos > last) out.push_back(pos - last);
      out.push_back(static_cast<size_t>(it->length()));
      last = pos + static_cast<size_t>(it->length());
    }
    if (last < len) out.push_back(len - last);
    start += len;
  }
  return out;
}

// \x{HHHH} escapes (our spelling of non-ASCII) become the characters themselves.
std::wstring to_wregex(const std::string& expr) {
  std::wstring out;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr.compare(i, 3, "\\x{") == 0) {
      const size_t close = expr.find('}', i);
      out += static_cast<wchar_t>(std::stoul(expr.substr(i + 3, close - i - 3), nullptr, 16));
      i = close;
    } else {
      out += static_cast<wchar_t>(static_cast<unsigned char>(expr[i]));
    }
  }
  return out;
}

std::vector<std::string> reference_split(const std::u32string& text,
                                         const std::vector<std::string>& exprs) {
  std::string collapsed;
  std::wstring wide;
  for (char32_t c : text) {
    collapsed += collapsed_of(c);
    wide += static_cast<wchar_t>(c > 0x7F && unicode::is_whitespace(c) ? 0x0B : c);
  }
  std::vector<size_t> pieces;
  if (!text.empty()) pieces.push_back(text.size());
  const auto flags = std::regex_constants::optimize | std::regex_constants::nosubs;
  for (const std::string& e : exprs) {
    if (regex_uses_categories(e)) {
      pieces = std_split(collapsed, std::regex(collapse_regex(e), flags), pieces);
    } else {
      pieces = std_split(wide, std::wregex(to_wregex(e), flags), pieces);
    }
  }
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t len : pieces) {
    if (len > 0) words.push_back(utf8(text.substr(start, len)));
    start += len;
  }
  return words;
}

TEST(TokenizerRegex, CollapsedRegex) {
  EXPECT_EQ(collapse_regex("\\p{N}+"), "[\xD1" "0-9]+");
  EXPECT_EQ(collapse_regex("[^\\s\\p{L}\\p{N}]+"), "[^\\s\xD2" "A-Za-z\xD1" "0-9]+");
  EXPECT_EQ(collapse_regex("[\\p{P}\\$]"), "[\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}\\$]");
  EXPECT_EQ(collapse_regex("\\p{Lu}\\p{M}"), "[\xD2" "A-Za-z][\xD4]");
  EXPECT_TRUE(regex_uses_categories("a\\p{S}"));
  EXPECT_FALSE(regex_uses_categories("[0-9]+\\s"));
}

TEST(TokenizerRegex, MatchesStdRegexAsLlamaCppRunsIt) {
  std::mt19937 rng(1234);
  for (const char* pre : {"default", "gpt-2", "llama3", "qwen2", "qwen35", "starcoder",
                          "falcon", "deepseek-llm", "deepseek-coder", "deepseek-v3", "poro-chat",
                          "viking", "tekken", "chameleon", "gpt-4o", "superbpe", "bailingmoe",
                          "seed-coder"}) {
    const std::vector<std::string> exprs = pre_tokenizer_spec(pre, "test").regexes;
    const RegexSplitter splitter(exprs);
    for (int i = 0; i < 300; ++i) {
      const std::u32string text = random_text(rng);
      ASSERT_EQ(splitter.split(utf8(text)), reference_split(text, exprs))
          << pre << " on '" << utf8(text) << "'";
    }
  }
}

// Rules of llama.cpp's hand-written splitters, on class bytes. `llama3` selects the llama3
// variant (case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, newline runs).
std::vector<size_t> custom_split(const std::string& c, bool llama3) {
  auto letter = [&](size_t i) {
    return i < c.size() && (c[i] == '\xD2' || std::isalpha(static_cast<unsigned char>(c[i])));
  };
  auto number = [&](size_t i) {
    return i < c.size() && (c[i] == '\xD1' || std::isdigit(static_cast<unsigned char>(c[i])));
  };
  auto space = [&](size_t i) {
    return i < c.size() && std::isspace(static_cast<unsigned char>(c[i])) != 0;
  };
  auto other = [&](size_t i) { return i < c.size() && !space(i) && !letter(i) && !number(i); };
  auto low = [&](size_t i) {
    return i < c.size() ? (llama3 ? std::tolower(static_cast<unsigned char>(c[i])) : c[i]) : 0;
  };
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < c.size()) {
    size_t end = pos;
    if (c[pos] == '\'' && (low(pos + 1) == 's' || low(pos + 1) == 't' || low(pos + 1) == 'm' ||
                           low(pos + 1) == 'd')) {
      end = pos + 2;
    } else if (c[pos] == '\'' && ((low(pos + 1) == 'r' && low(pos + 2) == 'e') ||
                                  (low(pos + 1) == 'v' && low(pos + 2) == 'e') ||
                                  (low(pos + 1) == 'l' && low(pos + 2) == 'l'))) {
      end = pos + 3;
    } else if (llama3 && c[pos] != '\r' && c[pos] != '\n' && !number(pos) &&
               (letter(pos) || letter(pos + 1))) {
      for (end = pos + 1; letter(end);) ++end;
    } else if (!llama3 && (letter(pos) || (c[pos] == ' ' && letter(pos + 1)))) {
      for (end = pos + 1; letter(end);) ++end;
    } else if (number(pos) || (!llama3 && c[pos] == ' ' && number(pos + 1))) {
      for (end = pos + 1; number(end) && (!llama3 || end - pos < 3);) ++end;
    } else if (other(pos) || (c[pos] == ' ' && other(pos + 1))) {
      for (end = pos + 1; other(end);) ++end;
      while (llama3 && end < c.size() && (c[end] == '\r' || c[end] == '\n')) ++end;
    } else {
      size_t n = 0, last_nl = 0;
      while (space(pos + n)) {
        if (c[pos + n] == '\r' || c[pos + n] == '\n') last_nl = pos + n + 1;
        ++n;
      }
      if (llama3 && last_nl > 0) {
        end = last_nl;
      } else {
        end = pos + (n > 1 && pos + n < c.size() ? n - 1 : n);  // \s+(?!\S), else \s+
      }
    }
    out.push_back(end - pos);
    pos = end;
  }
  return out;
}

TEST(TokenizerRegex, MatchesHandWrittenGpt2AndLlama3Splitters) {
  std::mt19937 rng(99);
  for (const char* pre : {"gpt-2", "llama3"}) {
    const bool llama3 = std::string(pre) == "llama3";
    const RegexSplitter splitter(pre_tokenizer_spec(pre, "test").regexes);
    for (int i = 0; i < 3000; ++i) {
      const std::u32string text = random_text(rng);
      std::string collapsed;
      for (char32_t ch : text) collapsed += collapsed_of(ch);
      std::vector<std::string> expected;
      size_t start = 0;
      for (size_t len : custom_split(collapsed, llama3)) {
        expected.push_back(utf8(text.substr(start, len)));
        start += len;
      }
      ASSERT_EQ(splitter.split(utf8(text)), expected) << pre << " on '" << utf8(text) << "'";
    }
  }
}

TEST(TokenizerRegex, InvalidUtf8BecomesReplacementCharacter) {
  const RegexSplitter splitter(pre_tokenizer_spec("gpt-2", "test").regexes);
  EXPECT_EQ(splitter.split("a\xFF" "b"),
            (std::vector<std::string>{"a", "\xEF\xBF\xBD", "b"}));
}

}  // namespace
}  // namespace sy
