// The vocabulary as the tokenizers see it: token texts, scores and attributes, special
// token ids and the tokenizer flags, read from `tokenizer.*` GGUF metadata with the same
// defaults and fix-ups as llama.cpp's llama_vocab::impl::load.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace sy {

class GgufFile;

// Token attributes, bit for bit llama.cpp's llama_token_attr.
namespace token_attr {
constexpr uint32_t kUndefined = 0;
constexpr uint32_t kUnknown = 1u << 0;
constexpr uint32_t kUnused = 1u << 1;
constexpr uint32_t kNormal = 1u << 2;
constexpr uint32_t kControl = 1u << 3;
constexpr uint32_t kUserDefined = 1u << 4;
constexpr uint32_t kByte = 1u << 5;
constexpr uint32_t kLstrip = 1u << 7;
constexpr uint32_t kRstrip = 1u << 8;
}  // namespace token_attr

enum class VocabType { Spm, Bpe };

// Lets the token map be searched with a string_view (no temporary string per lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  VocabType type = VocabType::Spm;
  std::string path;   // the GGUF file, for messages
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre, "default" when absent
  PreTokenizerSpec pre_spec;  // BPE only

  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint32_t> attr;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;

  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prefix a space; decode: drop the first one
  bool clean_spaces = false;      // decode: HF's clean_up_tokenization_spaces
  bool ignore_merges = false;     // BPE: a word that is a token is kept whole

  std::set<int32_t> eog;         // end-of-generation tokens
  std::vector<int32_t> special;  // control, user-defined and unknown tokens, longest first

  int32_t n() const { return static_cast<int32_t>(text.size()); }
  // -1 when no token has exactly this text.
  int32_t find(std::string_view s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }
  bool has(int32_t id, uint32_t a) const { return (attr[static_cast<size_t>(id)] & a) != 0; }
};

// Throws sy::Error naming the file and key for anything missing, malformed or unsupported
// (the message for an unknown tokenizer.ggml.model lists the supported ones).
Vocab load_vocab(const GgufFile& f);

}  // namespace sy
