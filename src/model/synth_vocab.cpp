#include "model/synth_vocab.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "tokenizer/unicode.h"

namespace sy {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void add_synth_vocab(GgufWriter& w, int64_t n_vocab) {
  const unicode::ByteMap& bm = unicode::byte_map();
  auto printable = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  std::vector<std::string> tokens, merges;
  tokens.reserve(static_cast<size_t>(n_vocab));
  for (int pass = 0; pass < 2; ++pass) {
    for (int b = 0; b < 256; ++b) {
      if (printable(b) == (pass == 0)) tokens.push_back(bm.byte_to_utf8(static_cast<uint8_t>(b)));
    }
  }
  std::vector<std::string> level{bm.byte_to_utf8(' ')}, letters;
  for (char c = 'a'; c <= 'z'; ++c) letters.emplace_back(1, c);
  for (char c = 'a'; c <= 'z'; ++c) level.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) level.emplace_back(1, c);
  const size_t n_normal = static_cast<size_t>(n_vocab - 1);
  while (tokens.size() < n_normal) {
    std::vector<std::string> next;
    for (size_t i = 0; i < level.size() && tokens.size() < n_normal; ++i) {
      for (size_t c = 0; c < letters.size() && tokens.size() < n_normal; ++c) {
        next.push_back(level[i] + letters[c]);
        tokens.push_back(next.back());
        merges.push_back(level[i] + " " + letters[c]);
      }
    }
    level = std::move(next);
  }
  tokens.push_back("<|endoftext|>");
  std::vector<int32_t> types(tokens.size(), 1);  // normal
  types.back() = 3;                              // control
  const uint32_t eos = static_cast<uint32_t>(tokens.size() - 1);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_uint32("tokenizer.ggml.bos_token_id", eos);
  w.add_uint32("tokenizer.ggml.eos_token_id", eos);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
}

void add_file_vocab(GgufWriter& w, const std::string& path, int64_t n_vocab) {
  std::unique_ptr<GgufFile> f;
  try {
    f = GgufFile::open(path);
  } catch (const Error& e) {
    throw Error(std::string("--vocab: ") + e.what());
  }
  const std::string kTokens = "tokenizer.ggml.tokens", kScores = "tokenizer.ggml.scores",
                    kTypes = "tokenizer.ggml.token_type", kMerges = "tokenizer.ggml.merges";
  if (!f->has(kTokens)) throw Error("--vocab " + path + ": no " + kTokens + " (not a vocabulary GGUF)");
  const std::vector<std::string_view>& file_tokens = f->get_string_array(kTokens);
  const size_t n = static_cast<size_t>(n_vocab), n_file = file_tokens.size();
  const size_t n_keep = std::min(n, n_file);
  std::vector<std::string> tokens(file_tokens.begin(), file_tokens.begin() + n_keep);
  std::unordered_set<std::string> known(tokens.begin(), tokens.end());
  for (size_t i = 0; tokens.size() < n; ++i) {
    std::string pad = "<|pad_" + std::to_string(i) + "|>";
    if (!known.insert(pad).second) throw Error("--vocab " + path + ": already has a token '" + pad + "'");
    tokens.push_back(std::move(pad));
  }
  bool wrote_types = false;
  for (const auto& [key, value] : f->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    if (n == n_file) {
      w.add_value(key, value);
    } else if (key == kTokens) {
      w.add_string_array(key, tokens);
    } else if (key == kScores) {
      std::vector<float> scores = f->get_float_array(key);
      scores.resize(n, 0.0f);
      w.add_float32_array(key, scores);
    } else if (key == kTypes) {
      const std::vector<int64_t> t = f->get_int_array(key);
      std::vector<int32_t> types(n, 4);  // padding tokens are user-defined
      for (size_t i = 0; i < n_keep && i < t.size(); ++i) types[i] = static_cast<int32_t>(t[i]);
      w.add_int32_array(key, types);
      wrote_types = true;
    } else if (key == kMerges && n < n_file) {
      std::vector<std::string> kept;
      for (std::string_view m : f->get_string_array(key)) {
        const size_t sp = m.size() < 2 ? std::string_view::npos : m.find(' ', 1);
        if (sp == std::string_view::npos) continue;
        const std::string l(m.substr(0, sp)), r(m.substr(sp + 1));
        if (known.count(l) && known.count(r) && known.count(l + r)) kept.emplace_back(m);
      }
      w.add_string_array(key, kept);
    } else if (ends_with(key, "_token_id") && value.type != GgufType::ARRAY &&
               value.type != GgufType::STRING && f->get_int(key, -1) >= n_vocab) {
      continue;  // points past the truncated vocabulary
    } else {
      w.add_value(key, value);
    }
  }
  if (n > n_file && !wrote_types) {
    std::vector<int32_t> types(n, 1);
    std::fill(types.begin() + static_cast<std::ptrdiff_t>(n_file), types.end(), 4);
    w.add_int32_array(kTypes, types);
  }
}

}  // namespace sy
