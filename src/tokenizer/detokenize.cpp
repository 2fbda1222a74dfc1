#include "tokenizer/detokenize.h"

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace sy {

namespace {

std::string unescape_spaces(const std::string& s) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Byte-level BPE text back to bytes. A character outside the byte table is written the
// way llama.cpp writes it, so that outputs stay comparable.
std::string unmap_bytes(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const unicode::ByteMap& map = unicode::byte_map();
  std::string out;
  for (uint32_t c : unicode::decode_utf8(s)) {
    const int b = map.codepoint_to_byte(c);
    if (b >= 0) {
      out += static_cast<char>(b);
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (char u : unicode::to_utf8(c)) {
      out += kHex[static_cast<uint8_t>(u) >> 4];
      out += kHex[static_cast<uint8_t>(u) & 15];
    }
    out += s + "]";
  }
  return out;
}

uint8_t byte_of_token(const std::string& text) {
  // "<0xXX>"; llama.cpp reads the two hex digits with strtol.
  return static_cast<uint8_t>(std::stoi(text.substr(3, 2), nullptr, 16));
}

}  // namespace

std::string render_piece(const Vocab& v, int32_t id) {
  const std::string& text = v.text[id];
  if (v.has(id, token_attr::kUnknown | token_attr::kControl | token_attr::kUserDefined)) {
    return text;
  }
  if (v.has(id, token_attr::kNormal)) {
    return v.type == VocabType::Spm ? unescape_spaces(text) : unmap_bytes(text);
  }
  if (v.has(id, token_attr::kByte)) {
    try {
      return std::string(1, static_cast<char>(byte_of_token(text)));
    } catch (const std::exception&) {
      return std::string(1, '\0');  // not "<0xXX>": strtol would have read 0
    }
  }
  return {};
}

void clean_up_spaces(std::string& t) {
  // Three in-place passes with the same index arithmetic as llama.cpp (the second pass
  // blanks the space after " ' " with a NUL that the next step then sees).
  size_t total = t.size();
  size_t n = total ? 1 : 0;
  for (size_t i = 1; i < total; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --n;
    t[n++] = x;
  }
  total = n;
  n = total ? 1 : 0;
  for (size_t i = 1; i < total; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < total && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --n;
      t[++i] = '\0';
    }
    t[n++] = x;
  }
  total = n;
  n = total ? 1 : 0;
  for (size_t i = 1; i < total; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < total) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --n;
      } else if (i + 2 < total) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --n;
      }
    }
    t[n++] = x;
  }
  t.resize(n);
}

}  // namespace sy
