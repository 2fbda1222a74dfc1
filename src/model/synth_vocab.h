// The vocabulary a synthetic model (`switchyard synth`) carries: its own byte-level BPE or
// one copied from a vocabulary GGUF (`--vocab`).
#pragma once

#include <cstdint>
#include <string>

#include "formats/gguf_writer.h"

namespace sy {

// A byte-level BPE vocabulary (GPT-2 style) of n_vocab tokens: the 256 byte tokens in
// GPT-2's byte-to-unicode order, then merged tokens built by extending a space marker or a
// letter one lowercase letter at a time ("Ġa", "ab", ..., "Ġab", ...) with one merge each,
// then <|endoftext|>.
void add_synth_vocab(GgufWriter& w, int64_t n_vocab);

// Copies tokenizer.* from the vocabulary GGUF at `path`, padded or truncated to n_vocab
// tokens (merges and special-token ids that fall outside are dropped).
void add_file_vocab(GgufWriter& w, const std::string& path, int64_t n_vocab);

}  // namespace sy
