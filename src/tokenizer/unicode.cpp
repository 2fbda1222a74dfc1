#include "tokenizer/unicode.h"

namespace sy::unicode {

size_t utf8_len(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

namespace {

bool is_cont(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}

// One codepoint at `off`, or U+FFFD consuming a single byte. Same acceptance rules as
// llama.cpp's unicode_cpt_from_utf8 (no overlong or surrogate checks).
uint32_t decode_one(std::string_view s, size_t& off) {
  const uint8_t b0 = static_cast<uint8_t>(s[off]);
  if (b0 < 0x80) {
    off += 1;
    return b0;
  }
  if ((b0 & 0x40) == 0) {  // stray continuation byte
    off += 1;
    return 0xFFFD;
  }
  if ((b0 & 0x20) == 0) {
    if (!is_cont(s, off + 1)) {
      off += 1;
      return 0xFFFD;
    }
    const uint32_t c = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(s[off + 1]) & 0x3Fu);
    off += 2;
    return c;
  }
  if ((b0 & 0x10) == 0) {
    if (!is_cont(s, off + 1) || !is_cont(s, off + 2)) {
      off += 1;
      return 0xFFFD;
    }
    const uint32_t c = ((b0 & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[off + 1]) & 0x3Fu) << 6) |
                       (static_cast<uint8_t>(s[off + 2]) & 0x3Fu);
    off += 3;
    return c;
  }
  if ((b0 & 0x08) == 0) {
    if (!is_cont(s, off + 1) || !is_cont(s, off + 2) || !is_cont(s, off + 3)) {
      off += 1;
      return 0xFFFD;
    }
    const uint32_t c = ((b0 & 0x07u) << 18) | ((static_cast<uint8_t>(s[off + 1]) & 0x3Fu) << 12) |
                       ((static_cast<uint8_t>(s[off + 2]) & 0x3Fu) << 6) |
                       (static_cast<uint8_t>(s[off + 3]) & 0x3Fu);
    off += 4;
    return c;
  }
  off += 1;
  return 0xFFFD;
}

}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t off = 0;
  while (off < text.size()) out.push_back(decode_one(text, off));
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c > 0x10FFFF) c = 0xFFFD;  // llama.cpp throws here; a replacement char is kinder
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(uint32_t cpt) {
  std::string s;
  append_utf8(s, cpt);
  return s;
}

bool is_whitespace(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

ByteMap::ByteMap() {
  from_cpt_.fill(-1);
  auto printable = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  // Printable Latin-1 bytes stand for themselves; the rest are moved past U+00FF in order.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const int cpt = printable(b) ? b : next++;
    to_utf8_[b] = to_utf8(static_cast<uint32_t>(cpt));
    from_cpt_[cpt] = static_cast<int16_t>(b);
  }
}

int ByteMap::codepoint_to_byte(uint32_t cpt) const {
  return cpt < from_cpt_.size() ? from_cpt_[cpt] : -1;
}

const ByteMap& byte_map() {
  static const ByteMap map;  // immutable once built
  return map;
}

}  // namespace sy::unicode
