// UTF-8 and Unicode helpers for the tokenizers. The decoding rules copy llama.cpp's on
// purpose (lenient: overlong forms are accepted, a bad byte becomes U+FFFD), because the
// token ids we must reproduce were produced with them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sy::unicode {

// Length of the UTF-8 sequence a lead byte announces, from its high nibble (1 for a stray
// continuation byte), as SentencePiece and llama.cpp split text into symbols.
size_t utf8_len(char lead);

// Decodes text into codepoints; an invalid sequence consumes one byte and yields U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view text);

// Appends the UTF-8 form of cpt; codepoints above U+10FFFF are written as U+FFFD.
void append_utf8(std::string& out, uint32_t cpt);
std::string to_utf8(uint32_t cpt);

// Unicode White_Space property (PropList.txt). Not PCRE2's \s: that one also matches U+180E.
bool is_whitespace(uint32_t cpt);

// GPT-2's reversible byte <-> printable character table used by byte-level BPE.
class ByteMap {
 public:
  ByteMap();
  const std::string& byte_to_utf8(uint8_t b) const { return to_utf8_[b]; }
  // -1 when cpt is not the image of a byte.
  int codepoint_to_byte(uint32_t cpt) const;

 private:
  std::array<std::string, 256> to_utf8_;
  std::array<int16_t, 512> from_cpt_{};  // every image is below U+0200
};

const ByteMap& byte_map();

}  // namespace sy::unicode
