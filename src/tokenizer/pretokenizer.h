// Byte-level BPE pre-tokenizers, chosen by `tokenizer.ggml.pre` the way llama.cpp does:
// the regexes that split text into words and the flags that come with each choice.
#pragma once

#include <string>
#include <vector>

namespace sy {

struct PreTokenizerSpec {
  std::vector<std::string> regexes;  // applied in sequence (see RegexSplitter)
  bool ignore_merges = false;        // a word that is a whole token is not merged
  bool clean_spaces = true;          // decode removes " ," " ." " 's" ... like HF
  bool add_bos = false;              // default when tokenizer.ggml.add_bos_token is absent
  bool no_bos = false;               // the vocabulary has no BOS unless the metadata says so
};

// `pre` is the value of tokenizer.ggml.pre, "default" when the key is absent. Throws
// sy::Error naming `file` and listing the supported names for an unknown one.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre, const std::string& file);

// Names pre_tokenizer_spec accepts, for messages and tests.
std::vector<std::string> supported_pre_tokenizers();

}  // namespace sy
