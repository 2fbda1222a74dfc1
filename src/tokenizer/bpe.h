// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe: split
// text into words with the pre-tokenizer regexes, map every byte of a word to its GPT-2
// printable character, then repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) and emit the resulting tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex_split.h"
#include "tokenizer/vocab.h"

namespace sy {

class GgufFile;

class BpeModel {
 public:
  // Reads tokenizer.ggml.merges and compiles the pre-tokenizer of `vocab.pre_spec`.
  BpeModel(const GgufFile& f, const Vocab& vocab);

  void tokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

  // Merge rank of the pair, -1 when there is no such merge (exposed for tests).
  int rank(std::string_view left, std::string_view right) const;

 private:
  void tokenize_word(const Vocab& vocab, const std::string& word, std::vector<int32_t>& out) const;

  // Keyed by the merge line "left right" (byte-level tokens never contain a raw space).
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ranks_;
  RegexSplitter splitter_;
};

}  // namespace sy
