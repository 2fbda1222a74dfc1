#include "tokenizer/vocab.h"

#include <algorithm>
#include <initializer_list>

#include "base/ascii.h"
#include "base/error.h"
#include "formats/gguf_reader.h"

namespace sy {

namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kPreKey = "tokenizer.ggml.pre";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";

// tokenizer.ggml.token_type values (llama_token_type) to attributes.
uint32_t attr_of_type(int64_t type) {
  switch (type) {
    case 1: return token_attr::kNormal;
    case 2: return token_attr::kUnknown;
    case 3: return token_attr::kControl;
    case 4: return token_attr::kUserDefined;
    case 5: return token_attr::kUnused;
    case 6: return token_attr::kByte;
    default: return token_attr::kUndefined;
  }
}

void read_tokens(const GgufFile& f, Vocab& v) {
  if (!f.has(kTokensKey)) throw Error(f.path() + ": missing " + std::string(kTokensKey));
  const std::vector<std::string_view>& words = f.get_string_array(kTokensKey);
  const size_t n = words.size();
  std::vector<float> scores;
  if (f.has(kScoresKey)) {
    scores = f.get_float_array(kScoresKey);
    if (scores.size() < n) {
      throw Error(f.path() + ": " + kScoresKey + " has " + std::to_string(scores.size()) +
                  " entries for " + std::to_string(n) + " tokens");
    }
  }
  std::vector<int64_t> types;
  if (f.has(kTypesKey)) {
    types = f.get_int_array(kTypesKey);
    if (types.size() < n) {
      throw Error(f.path() + ": " + kTypesKey + " has " + std::to_string(types.size()) +
                  " entries for " + std::to_string(n) + " tokens");
    }
  }
  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, token_attr::kNormal);
  for (size_t i = 0; i < n; ++i) {
    std::string word(words[i]);
    if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names it
    // Inserted in id order, like llama.cpp's map: its iteration order decides ties below.
    auto [it, fresh] = v.ids.emplace(word, static_cast<int32_t>(i));
    if (!fresh) {
      throw Error(f.path() + ": duplicate token in " + kTokensKey + ": '" + word + "' has ids " +
                  std::to_string(it->second) + " and " + std::to_string(i));
    }
    v.text[i] = std::move(word);
    if (!scores.empty()) v.score[i] = scores[i];
    if (!types.empty()) v.attr[i] = attr_of_type(types[i]);
  }
}

// Special ids from metadata over the per-model defaults already in `v`; a default out of
// range is dropped and an out-of-range value in the file is ignored, as llama.cpp does.
void read_special_ids(const GgufFile& f, Vocab& v) {
  const std::initializer_list<std::pair<const char*, int32_t*>> keys = {
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.seperator_token_id", &v.sep},  // sic, the GGUF key is misspelt
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.mask_token_id", &v.mask},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre},  // older names of the FIM keys
      {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  };
  for (const auto& [key, id] : keys) {
    if (*id >= v.n()) *id = -1;
    if (!f.has(key)) continue;
    const int64_t value = f.get_int(key, -1);
    if (value >= 0 && value < v.n()) *id = static_cast<int32_t>(value);
  }
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> list) {
  return std::any_of(list.begin(), list.end(), [&](const char* x) { return s == x; });
}

// llama.cpp finds EOT, EOM and FIM tokens by their text when the metadata does not name
// them, and makes them control tokens.
void detect_special_by_text(Vocab& v) {
  struct Rule {
    int32_t* id;
    std::initializer_list<const char*> texts;
  };
  const Rule rules[] = {
      {&v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                "<end_of_utterance>"}},
      {&v.eom, {"<|eom_id|>"}},
      {&v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                    "\xE2\x96\x81<PRE>", "<|code_prefix|>"}},
      {&v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                    "\xE2\x96\x81<SUF>", "<|code_suffix|>"}},
      {&v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                    "\xE2\x96\x81<MID>", "<|code_middle|>"}},
      {&v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}},
      {&v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&v.fim_sep, {"<|file_sep|>"}},
  };
  for (const auto& [text, id] : v.ids) {
    for (const Rule& r : rules) {
      if (*r.id != -1 || !is_one_of(text, r.texts)) continue;
      *r.id = id;
      v.attr[id] |= token_attr::kControl;
    }
  }
  // Control tokens named "unused..." are placeholders.
  for (const auto& [text, id] : v.ids) {
    if (v.has(id, token_attr::kControl) && text.find("unused") != std::string::npos) {
      v.attr[id] |= token_attr::kUnused;
    }
  }
}

void build_eog(Vocab& v) {
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep}) {
    if (id != -1) v.eog.insert(id);
  }
  for (const auto& [text, id] : v.ids) {
    if (is_one_of(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                         "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                         "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>"})) {
      v.eog.insert(id);
      v.attr[id] |= token_attr::kControl;
    }
  }
  // gpt-oss renders these although they look special.
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = v.find(t);
    if (id >= 0) v.attr[id] = token_attr::kUserDefined;
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id != -1) v.eog.insert(id);
  }
  // With <|return|> and <|call|> (o200k_harmony), <|end|> ends a message, not generation.
  const int32_t end = v.find("<|end|>");
  if (end >= 0 && v.eog.count(end) && v.eog.count(v.find("<|return|>")) &&
      v.eog.count(v.find("<|call|>"))) {
    v.eog.erase(end);
    v.attr[end] = token_attr::kUserDefined;
  }
}

void build_special_cache(Vocab& v) {
  for (int32_t id = 0; id < v.n(); ++id) {
    if (v.has(id, token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown)) {
      v.special.push_back(id);
    }
  }
  // Longest first so that a token is never split by a shorter one it contains. llama.cpp's
  // sort is not stable; ties between equal-length tokens only matter if they overlap.
  std::stable_sort(v.special.begin(), v.special.end(), [&](int32_t a, int32_t b) {
    return v.text[a].size() > v.text[b].size();
  });
}

// Per-model strip attributes llama.cpp sets by name (they are not in the GGUF).
void apply_named_attrs(const GgufFile& f, Vocab& v) {
  const std::string name = ascii_lower(f.get_string("general.name", ""));
  auto set = [&](const char* text, uint32_t a, bool on) {
    const int32_t id = v.find(text);
    if (id >= 0) v.attr[id] = on ? (v.attr[id] | a) : (v.attr[id] & ~a);
  };
  if (v.pre.find("jina-v2-de") != std::string::npos ||
      v.pre.find("jina-v2-es") != std::string::npos ||
      v.pre.find("jina-v2-code") != std::string::npos) {
    set("<mask>", token_attr::kLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special) v.attr[id] |= token_attr::kRstrip;
    set("</s>", token_attr::kRstrip, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, token_attr::kRstrip, false);
  }
}

}  // namespace

Vocab load_vocab(const GgufFile& f) {
  Vocab v;
  v.path = f.path();
  if (!f.has(kModelKey)) throw Error(f.path() + ": missing " + std::string(kModelKey));
  v.model = f.get_string(kModelKey);
  const std::string pre = f.get_string(kPreKey, "");
  v.pre = pre.empty() ? "default" : pre;

  if (v.model == "llama") {
    v.type = VocabType::Spm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (v.model == "gpt2") {
    v.type = VocabType::Bpe;
    v.pre_spec = pre_tokenizer_spec(v.pre, f.path());
    v.bos = v.pre_spec.no_bos ? -1 : 11;  // llama.cpp's (odd) defaults for BPE
    v.eos = 11;
    v.clean_spaces = v.pre_spec.clean_spaces;
    v.ignore_merges = v.pre_spec.ignore_merges;
    v.add_bos = v.pre_spec.add_bos;
  } else {
    throw Error(f.path() + ": unsupported " + kModelKey + " '" + v.model +
                "' (supported: llama (SentencePiece), gpt2 (byte-level BPE))");
  }
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  read_tokens(f, v);
  read_special_ids(f, v);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (v.add_bos && v.bos < 0) {
    throw Error(f.path() + ": tokenizer.ggml.add_bos_token is true, but "
                "tokenizer.ggml.bos_token_id is not set");
  }
  if (v.add_eos && v.eos < 0) {
    throw Error(f.path() + ": tokenizer.ggml.add_eos_token is true, but "
                "tokenizer.ggml.eos_token_id is not set");
  }

  detect_special_by_text(v);
  build_eog(v);
  build_special_cache(v);
  apply_named_attrs(f, v);
  return v;
}

}  // namespace sy
