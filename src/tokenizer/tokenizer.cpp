#include "tokenizer/tokenizer.h"

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "tokenizer/bpe.h"
#include "tokenizer/detokenize.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

namespace sy {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  auto vocab = std::make_unique<Vocab>(load_vocab(f));
  if (vocab->type == VocabType::Bpe) t->bpe_ = std::make_unique<BpeModel>(f, *vocab);
  t->pieces_.reserve(vocab->text.size());
  for (int32_t id = 0; id < vocab->n(); ++id) t->pieces_.push_back(render_piece(*vocab, id));
  t->vocab_ = std::move(vocab);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                       bool add_eos) const {
  std::vector<int32_t> out = encode_text(text, add_bos, parse_special);
  if (add_eos) {
    if (vocab_->eos < 0) throw Error(vocab_->path + ": cannot add EOS: the vocabulary has no EOS token");
    out.push_back(vocab_->eos);
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode_text(std::string_view text, bool add_bos, bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<int32_t> out;
  if (add_bos) {
    if (v.bos < 0) throw Error(v.path + ": cannot add BOS: the vocabulary has no BOS token");
    out.push_back(v.bos);
  }
  const std::vector<Fragment> frags = partition_special(v, text, parse_special);
  if (v.type == VocabType::Bpe) {
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        bpe_->tokenize(v, text.substr(f.off, f.len), out);
      }
    }
    return out;
  }
  // SPM: a space goes in front of the text and of every fragment that follows a special
  // token (llama.cpp's is_prev_special), then spaces are escaped as U+2581.
  bool prev_special = true;
  std::string escaped;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    escaped.clear();
    if (v.add_space_prefix && prev_special) escaped = "\xE2\x96\x81";
    for (char c : text.substr(f.off, f.len)) {
      if (c == ' ') {
        escaped += "\xE2\x96\x81";
      } else {
        escaped += c;
      }
    }
    spm_tokenize(v, escaped, out);
    prev_special = false;
  }
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_->n()) {
    throw Error("token id " + std::to_string(id) + " is out of range [0, " +
                std::to_string(vocab_->n()) + ") for the vocabulary of " + vocab_->path);
  }
}

const std::string& Tokenizer::piece(int32_t id, bool special) const {
  static const std::string kEmpty;
  check_id(id);
  if (!special && vocab_->has(id, token_attr::kControl | token_attr::kUnknown)) return kEmpty;
  return pieces_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  // SPM added a space in front when encoding: drop it from the first token, whatever
  // that token is (llama.cpp does not skip a leading BOS for this).
  bool strip_space = vocab_->add_space_prefix;
  for (const int32_t id : ids) {
    const std::string& p = piece(id, false);
    const size_t skip = strip_space && !p.empty() && p[0] == ' ' ? 1 : 0;
    out.append(p, skip, std::string::npos);
    strip_space = false;
  }
  if (vocab_->clean_spaces) clean_up_spaces(out);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const { return piece(id, true); }

int32_t Tokenizer::n_vocab() const { return vocab_->n(); }
int32_t Tokenizer::bos_id() const { return vocab_->bos; }
int32_t Tokenizer::eos_id() const { return vocab_->eos; }
bool Tokenizer::add_bos_default() const { return vocab_->add_bos; }
bool Tokenizer::add_eos_default() const { return vocab_->add_eos; }
bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && vocab_->eog.count(id) > 0; }

bool Tokenizer::is_control(int32_t id) const {
  check_id(id);
  return vocab_->has(id, token_attr::kControl);
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_->text[static_cast<size_t>(id)];
}

std::string Tokenizer::model_name() const { return vocab_->model; }
std::string Tokenizer::pre_name() const { return vocab_->pre; }

StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(tok) {}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.piece(id, false);
  // Hold back a trailing incomplete UTF-8 sequence: find the last lead byte among the
  // final (at most 4) bytes and compare the length it announces with what has arrived.
  size_t keep = pending_.size();
  for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
    const auto b = static_cast<uint8_t>(pending_[pending_.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (b < 0xF8 && need > back) keep = pending_.size() - back;
    break;
  }
  std::string ready = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace sy
