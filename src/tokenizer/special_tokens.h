// Splitting text on special-token strings before the model tokenizer runs, as llama.cpp's
// tokenizer_st_partition: every control, user-defined and unknown token text (longest
// first) cuts the remaining raw fragments, left to right. Without parse_special only
// user-defined tokens are cut out, as Hugging Face does with added tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace sy {

struct Vocab;

struct Fragment {
  int32_t token = -1;     // >= 0: a special token; -1: raw text
  size_t off = 0, len = 0;  // raw text: the bytes [off, off + len) of the input
};

std::vector<Fragment> partition_special(const Vocab& vocab, std::string_view text,
                                        bool parse_special);

}  // namespace sy
