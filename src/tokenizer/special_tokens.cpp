#include "tokenizer/special_tokens.h"

#include <cctype>

#include "tokenizer/vocab.h"

namespace sy {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Cuts every occurrence of `tok` (text `t`, attributes `attr`) out of one raw fragment.
void cut(const Fragment& f, std::string_view text, int32_t tok, std::string_view t,
         uint32_t attr, std::vector<Fragment>& out) {
  size_t off = f.off, len = f.len;
  while (len > 0) {
    const size_t match = text.substr(0, off + len).find(t, off);
    if (match == std::string_view::npos) break;
    size_t left_len = match - off;
    if (attr & token_attr::kLstrip) {
      while (left_len > 0 && is_space(text[off + left_len - 1])) --left_len;
    }
    if (left_len > 0) out.push_back({-1, off, left_len});
    out.push_back({tok, 0, 0});
    size_t right_off = match + t.size();
    size_t right_len = off + len - right_off;
    if (attr & token_attr::kRstrip) {
      while (right_len > 0 && is_space(text[right_off])) {
        ++right_off;
        --right_len;
      }
    }
    off = right_off;
    len = right_len;
  }
  if (len > 0) out.push_back({-1, off, len});
}

}  // namespace

std::vector<Fragment> partition_special(const Vocab& v, std::string_view text,
                                        bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : v.special) {
    const uint32_t attr = v.attr[id];
    if (!parse_special && (attr & (token_attr::kControl | token_attr::kUnknown))) continue;
    const std::string& t = v.text[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
      } else {
        cut(f, text, id, t, attr, next);
      }
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace sy
