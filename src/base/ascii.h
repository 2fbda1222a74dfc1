// ASCII-only text helpers for protocol tokens, flag values and names (HTTP header values,
// SY_ISA, tokenizer model names): locale-independent, unlike std::tolower on a char.
#pragma once

#include <cstdio>
#include <string>

namespace sy {

inline std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

inline bool ascii_iequals(const std::string& a, const std::string& b) {
  return ascii_lower(a) == ascii_lower(b);
}

// Appends a byte as \xNN (hex digits in `upper` or lower case).
inline void append_hex_escape(std::string& out, unsigned char byte, bool upper) {
  char esc[8];
  std::snprintf(esc, sizeof esc, upper ? "\\x%02X" : "\\x%02x", byte);
  out += esc;
}

// Control characters written as \xNN: text from a request, safe to put in a log line or
// an error message.
inline std::string escape_controls(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7F) append_hex_escape(out, u, true);
    else out += ch;
  }
  return out;
}

}  // namespace sy
