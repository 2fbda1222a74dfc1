// SentencePiece-style BPE over a scored vocabulary (tokenizer.ggml.model = "llama"), as
// llama.cpp's llm_tokenizer_spm: start from UTF-8 characters, repeatedly merge the adjacent
// pair whose concatenation is the highest-scoring token (ties: leftmost), then emit each
// piece, splitting non-tokens back along their merges and finally into byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sy {

struct Vocab;

// `text` is already escaped (spaces as U+2581) and prefixed; appends ids to `out`.
void spm_tokenize(const Vocab& vocab, const std::string& text, std::vector<int32_t>& out);

// The token for one raw byte: <0xXX>, else the one-character token, else UNK. Throws
// sy::Error when none exists.
int32_t spm_byte_token(const Vocab& vocab, uint8_t byte);

}  // namespace sy
