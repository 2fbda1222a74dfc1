// Pre-tokenizer word splitting with PCRE2, reproducing llama.cpp's unicode_regex_split.
//
// The regexes run in sequence; each one splits every piece left by the previous one, and
// text between two matches stays a piece of its own. Like llama.cpp, a regex that uses
// Unicode categories (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}, \p{Lu}...) does not run on the
// text itself but on a "collapsed" copy in which every non-ASCII codepoint is replaced by
// one byte naming its class (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark,
// 0xD5 symbol, 0xD0 anything else, 0x0B for White_Space), with each \p{X} rewritten to
// that byte plus the ASCII members llama.cpp gives the class. This is what makes
// PCRE2 agree with llama.cpp's hand-written splitters (gpt-2, llama3) and its std::regex
// fallback, quirks included (e.g. ASCII '~' and '`' are not \p{P} there).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

class RegexSplitter {
 public:
  // Compiles the regexes; throws sy::Error naming the regex that PCRE2 rejects.
  explicit RegexSplitter(const std::vector<std::string>& exprs);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Words in order; their concatenation is `text` with invalid UTF-8 bytes replaced by
  // U+FFFD (as llama.cpp does). Thread-safe.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The collapsed form of a regex (exposed for tests). Throws sy::Error when the regex also
// contains non-ASCII characters, which llama.cpp does not support either.
std::string collapse_regex(const std::string& expr);
bool regex_uses_categories(const std::string& expr);

}  // namespace sy
