// Token -> text pieces and the decode clean-up, as llama.cpp's token_to_piece and
// detokenize do them.
#pragma once

#include <cstdint>
#include <string>

namespace sy {

struct Vocab;

// The bytes token `id` stands for, rendering control and unknown tokens as their text
// (llama.cpp's token_to_piece with special=true); unused and undefined tokens are empty.
std::string render_piece(const Vocab& vocab, int32_t id);

// Hugging Face's clean_up_tokenization_spaces, byte for byte as llama.cpp implements it:
// " ?" " !" " ." " ," lose the space, " ' " becomes "'", and " 's" " 'm" " 're" " 've"
// lose the space.
void clean_up_spaces(std::string& text);

}  // namespace sy
