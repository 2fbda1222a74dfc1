#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace sy {

namespace {

// Class bytes of the collapsed text, and the ASCII members llama.cpp's collapsed regex
// gives each class (written as PCRE2 class-body source).
struct Category {
  const char* name;  // as written in a regex
  char byte;
  const char* ascii;
};
constexpr char kNumber = static_cast<char>(0xD1), kLetter = static_cast<char>(0xD2),
               kPunct = static_cast<char>(0xD3), kMark = static_cast<char>(0xD4),
               kSymbol = static_cast<char>(0xD5), kOther = static_cast<char>(0xD0);
constexpr char kDigits[] = "0-9";
constexpr char kLetters[] = "A-Za-z";
constexpr char kPunctAscii[] = "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
constexpr char kSymbolAscii[] = "\\$\\+<->^`\\|";
const std::array<Category, 10> kCategories = {{
    {"\\p{N}", kNumber, kDigits},
    {"\\p{L}", kLetter, kLetters},
    {"\\p{P}", kPunct, kPunctAscii},
    {"\\p{M}", kMark, ""},
    {"\\p{S}", kSymbol, kSymbolAscii},
    // llama.cpp has no finer letter classes: they all mean "any letter".
    {"\\p{Lu}", kLetter, kLetters},
    {"\\p{Ll}", kLetter, kLetters},
    {"\\p{Lt}", kLetter, kLetters},
    {"\\p{Lm}", kLetter, kLetters},
    {"\\p{Lo}", kLetter, kLetters},
}};

const Category* find_category(std::string_view pat) {
  for (const Category& c : kCategories) {
    if (pat == c.name) return &c;
  }
  return nullptr;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

CodePtr compile(const std::string& pattern, uint32_t options, const std::string& shown) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error("tokenizer pre-tokenizer regex '" + shown + "' does not compile: " +
                reinterpret_cast<const char*>(msg) + " (at offset " + std::to_string(err_off) +
                ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // speed only; the interpreter is the fallback
  return CodePtr(code);
}

bool is_pcre_utf_valid(uint32_t c) { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

}  // namespace

bool regex_uses_categories(const std::string& expr) {
  for (const Category& c : kCategories) {
    if (expr.find(c.name) != std::string::npos) return true;
  }
  return false;
}

std::string collapse_regex(const std::string& expr) {
  for (uint32_t c : unicode::decode_utf8(expr)) {
    if (c >= 128) {
      throw Error("tokenizer regex '" + expr +
                  "' mixes Unicode categories with non-ASCII characters (unsupported, as in "
                  "llama.cpp)");
    }
  }
  // Same rewrite as llama.cpp: track whether we are inside [...] (an escaped bracket is
  // recognised only by the preceding backslash) so that \p{X} becomes either a class of its
  // own or a part of the enclosing one.
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < expr.size(); ++i) {
    const char ch = expr[i];
    if (ch == '[' && (i == 0 || expr[i - 1] != '\\')) {
      out += '[';
      inside = true;
      continue;
    }
    if (inside && ch == ']' && expr[i - 1] != '\\') {
      out += ']';
      inside = false;
      continue;
    }
    if (ch == '\\' && i + 3 < expr.size() && expr[i + 1] == 'p' && expr[i + 2] == '{') {
      const size_t close = expr.find('}', i + 3);
      if (close != std::string::npos && close <= i + 10) {
        if (const Category* cat = find_category(std::string_view(expr).substr(i, close - i + 1))) {
          if (!inside) out += '[';
          out += cat->byte;
          out += cat->ascii;
          if (!inside) out += ']';
          i = close;
          continue;
        }
      }
    }
    out += ch;
  }
  return out;
}

namespace {

// Text a pass runs on. The collapsed text has one byte per codepoint; the plain one is
// UTF-8, with tables between byte offsets and codepoint indices.
struct Subject {
  std::string text;
  bool collapsed = false;
  std::vector<size_t> byte_of_cpt;  // plain only: size n_cpts + 1
  std::vector<size_t> cpt_of_byte;  // plain only: valid at character boundaries
  size_t byte(size_t cpt) const { return collapsed ? cpt : byte_of_cpt[cpt]; }
  size_t cpt(size_t byte) const { return collapsed ? byte : cpt_of_byte[byte]; }
};

// The one-byte-per-codepoint text the collapsed regexes run on.
Subject collapse_text(const pcre2_code* classifier, const std::vector<uint32_t>& cpts) {
  Subject sub;
  sub.collapsed = true;
  std::string& out = sub.text;
  out.assign(cpts.size(), kOther);
  MatchDataPtr md(pcre2_match_data_create_from_pattern(classifier, nullptr));
  std::string buf;
  for (size_t i = 0; i < cpts.size(); ++i) {
    const uint32_t c = cpts[i];
    if (c < 128) {
      out[i] = static_cast<char>(c);
      continue;
    }
    if (unicode::is_whitespace(c)) {
      out[i] = '\x0B';  // llama.cpp's stand-in: a character every \s matches
      continue;
    }
    if (!is_pcre_utf_valid(c)) continue;  // surrogates and beyond: no category
    buf.clear();
    unicode::append_utf8(buf, c);
    const int rc = pcre2_match(classifier, reinterpret_cast<PCRE2_SPTR>(buf.data()),
                               buf.size(), 0, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc > 1) {
      static constexpr char kByGroup[] = {kNumber, kLetter, kPunct, kMark, kSymbol};
      out[i] = kByGroup[rc - 2];  // rc - 1 is the highest group that took part: the match
    }
  }
  return sub;
}

// The UTF-8 subject for regexes without categories.
Subject plain_text(const std::vector<uint32_t>& cpts) {
  Subject sub;
  sub.byte_of_cpt.reserve(cpts.size() + 1);
  for (uint32_t c : cpts) {
    sub.byte_of_cpt.push_back(sub.text.size());
    if (c > 0x7F && unicode::is_whitespace(c)) c = 0x0B;  // std::wregex \s is ASCII-only
    if (!is_pcre_utf_valid(c)) c = 0xFFFD;                 // PCRE2 needs valid UTF-8
    unicode::append_utf8(sub.text, c);
  }
  sub.byte_of_cpt.push_back(sub.text.size());
  sub.cpt_of_byte.assign(sub.text.size() + 1, 0);
  for (size_t i = 0; i < sub.byte_of_cpt.size(); ++i) sub.cpt_of_byte[sub.byte_of_cpt[i]] = i;
  return sub;
}

// Splits each piece (length in codepoints) with one regex.
std::vector<size_t> split_pieces(const pcre2_code* code, const Subject& sub,
                                 const std::vector<size_t>& pieces) {
  std::vector<size_t> out;
  out.reserve(pieces.size());
  MatchDataPtr md(pcre2_match_data_create_from_pattern(code, nullptr));
  size_t start = 0;  // in codepoints
  for (const size_t len : pieces) {
    // Match offsets are bytes relative to the piece; pieces are recorded in codepoints.
    const size_t b0 = sub.byte(start);
    const size_t blen = sub.byte(start + len) - b0;
    const auto* subj = reinterpret_cast<PCRE2_SPTR>(sub.text.data() + b0);
    auto span = [&](size_t from, size_t to) { return sub.cpt(b0 + to) - sub.cpt(b0 + from); };
    size_t last_end = 0, pos = 0;
    // Our UTF-8 subjects are valid by construction; checking them on every call would
    // make splitting quadratic.
    const uint32_t base = sub.collapsed ? 0 : PCRE2_NO_UTF_CHECK;
    uint32_t opts = base;
    // Iterate like std::regex_iterator: after an empty match, retry at the same place for
    // a non-empty anchored one, else move on by one character.
    while (pos <= blen) {
      int rc = pcre2_match(code, subj, blen, pos, opts, md.get(), nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        // Very long words can outgrow the JIT's small stack; the interpreter uses the heap.
        rc = pcre2_match(code, subj, blen, pos, opts | PCRE2_NO_JIT, md.get(), nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) {
        if (opts == base || pos >= blen) break;
        pos += sub.collapsed ? 1 : unicode::utf8_len(sub.text[b0 + pos]);
        opts = base;
        continue;
      }
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof(msg));
        throw Error(std::string("tokenizer regex match failed: ") +
                    reinterpret_cast<const char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const size_t ms = ov[0], me = ov[1];
      if (ms > last_end) out.push_back(span(last_end, ms));
      if (me > ms) out.push_back(span(ms, me));  // empty words would add no tokens anyway
      last_end = me;
      pos = me;
      opts = me == ms ? (base | PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : base;
    }
    if (last_end < blen) out.push_back(span(last_end, blen));
    start += len;
  }
  return out;
}

}  // namespace

struct RegexSplitter::Impl {
  struct Pass {
    CodePtr code;
    bool collapsed = false;
  };
  std::vector<Pass> passes;
  CodePtr classifier;  // UTF + UCP: which of N, L, P, M, S a codepoint belongs to
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& exprs) : impl_(new Impl) {
  // PCRE2_DOLLAR_ENDONLY: '$' means end of piece, as in ECMAScript.
  bool need_classifier = false;
  for (const std::string& e : exprs) {
    Impl::Pass p;
    p.collapsed = regex_uses_categories(e);
    if (p.collapsed) {
      // Byte mode: the collapsed text has one byte per codepoint.
      p.code = compile(collapse_regex(e), PCRE2_DOLLAR_ENDONLY, e);
      need_classifier = true;
    } else {
      // No categories: match the codepoints themselves; \s, \d, \w stay ASCII as in
      // std::wregex, and non-ASCII White_Space is mapped to \v first (see plain_text()).
      p.code = compile(e, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, e);
    }
    impl_->passes.push_back(std::move(p));
  }
  if (need_classifier) {
    impl_->classifier =
        compile("(\\p{N})|(\\p{L})|(\\p{P})|(\\p{M})|(\\p{S})", PCRE2_UTF | PCRE2_UCP |
                PCRE2_ANCHORED, "classifier");
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  std::vector<size_t> pieces;
  if (!cpts.empty()) pieces.push_back(cpts.size());

  // Subjects for the two kinds of pass, built on first use.
  Subject collapsed, plain;
  bool have_collapsed = false, have_plain = false;
  for (const Impl::Pass& p : impl_->passes) {
    if (p.collapsed && !have_collapsed) {
      collapsed = collapse_text(impl_->classifier.get(), cpts);
      have_collapsed = true;
    } else if (!p.collapsed && !have_plain) {
      plain = plain_text(cpts);
      have_plain = true;
    }
    pieces = split_pieces(p.code.get(), p.collapsed ? collapsed : plain, pieces);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t start = 0;
  for (const size_t len : pieces) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) unicode::append_utf8(w, cpts[i]);
    words.push_back(std::move(w));
    start += len;
  }
  return words;
}

}  // namespace sy
