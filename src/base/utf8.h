// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF) for
// strings that come from files and end up in JSON, SVG or other files that must be UTF-8.
// The tokenizers decode leniently on purpose (tokenizer/unicode.h); this is not for them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sy {

bool is_valid_utf8(std::string_view s);

// `s` with every invalid sequence replaced by U+FFFD, cut to at most `max_bytes` bytes
// without splitting a character.
std::string valid_utf8(std::string_view s, size_t max_bytes = std::string::npos);

}  // namespace sy
