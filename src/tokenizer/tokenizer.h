// Text <-> token ids for GGUF models, matching llama.cpp (commit d32676d77) token for
// token: SentencePiece vocabularies (tokenizer.ggml.model "llama") and byte-level BPE
// ("gpt2") with the pre-tokenizer named by tokenizer.ggml.pre. Works on vocabulary-only
// GGUF files. Immutable once built, so one instance can serve many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

class GgufFile;
struct Vocab;
class BpeModel;

class Tokenizer {
 public:
  // Throws sy::Error naming the file and key at fault, e.g. for an unsupported
  // tokenizer.ggml.model (the message lists the supported ones).
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
  ~Tokenizer();

  // add_bos / add_eos: prepend BOS / append EOS (callers pass add_bos_default() and
  // add_eos_default(), the vocabulary's add_bos_token / add_eos_token, as llama.cpp's
  // tokenize with add_special does).
  // parse_special: text matching control/user-defined special token strings (e.g. "<s>",
  // "<|endoftext|>") becomes that token id. User-defined tokens are matched either way,
  // as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special, bool add_eos = false) const;
  // Like llama.cpp's detokenize with special=false: BOS/EOS/control/unknown tokens add no
  // text, SPM drops the space of the first token, BPE vocabularies with clean-up on get
  // " ," -> "," etc. Throws sy::Error for an id out of range.
  std::string decode(const std::vector<int32_t>& ids) const;
  // Raw bytes of one token: byte-fallback tokens become their byte, U+2581 a space for
  // SPM, byte-level BPE characters their bytes; control tokens give their text.
  std::string token_to_piece(int32_t id) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when absent
  int32_t eos_id() const;  // -1 when absent
  bool add_bos_default() const;
  bool add_eos_default() const;
  bool is_eog(int32_t id) const;  // EOS, EOT and other end-of-generation tokens
  bool is_control(int32_t id) const;
  const std::string& token_text(int32_t id) const;
  std::string model_name() const;  // tokenizer.ggml.model: "llama" / "gpt2"
  std::string pre_name() const;    // pre-tokenizer in use ("default" when the key is absent)

 private:
  std::vector<int32_t> encode_text(std::string_view text, bool add_bos, bool parse_special) const;
  friend class StreamDecoder;
  Tokenizer();
  void check_id(int32_t id) const;
  // The text a token adds when decoding; special = false hides control and unknown tokens.
  const std::string& piece(int32_t id, bool special) const;

  std::unique_ptr<const Vocab> vocab_;
  std::unique_ptr<const BpeModel> bpe_;  // byte-level BPE only
  std::vector<std::string> pieces_;      // token_to_piece for every id
};

// Streaming detokenizer: feed tokens one at a time and get back only complete UTF-8 text
// (a byte-level or byte-fallback token may carry part of a multi-byte character). Pieces
// are joined as they are, like llama.cpp's per-token streaming: no leading-space removal
// and no clean-up; control tokens add nothing. Keeps a reference to the tokenizer.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok);
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete character at the end of the stream).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace sy
