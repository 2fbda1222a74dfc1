#include "tokenizer/pretokenizer.h"

#include "base/error.h"

namespace sy {

namespace {

// The regexes are those of the upstream tokenizers as llama.cpp adapts them (e.g. (?i:...)
// spelled out as [sS] classes); any change changes token ids. Non-ASCII characters are
// written as \x{...} so that no editor can normalise them (several are NFC singletons).
const std::string kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const std::string kContractions =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const std::string kLlama3 = kContractions +
                            "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                            "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kQwen2 = kContractions +
                           "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                           "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kQwen35 =
    kContractions +
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?"
    "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" + kContractions +
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" + kContractions +
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kBailing =
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
const std::string kSeedCoder =
    kContractions +
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kPoro =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+";
const std::string kCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
const std::string kDeepseekLetters =  // the cased letters (L&), as in deepseek-llm
    "\\s?["
    "A-Za-z\\x{00B5}\\x{00C0}-\\x{00D6}\\x{00D8}-\\x{00F6}\\x{00F8}-\\x{01BA}"
    "\\x{01BC}-\\x{01BF}\\x{01C4}-\\x{0293}\\x{0295}-\\x{02AF}\\x{0370}-\\x{0373}"
    "\\x{0376}\\x{0377}\\x{037B}-\\x{037D}\\x{037F}\\x{0386}\\x{0388}-\\x{038A}\\x{038C}"
    "\\x{038E}-\\x{03A1}\\x{03A3}-\\x{03F5}\\x{03F7}-\\x{0481}\\x{048A}-\\x{052F}"
    "\\x{0531}-\\x{0556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}"
    "]+";

enum class Kind {
  Default, Gpt2, Llama3, Qwen2, Qwen35, Falcon, Starcoder, DeepseekLlm, DeepseekCoder,
  Deepseek3, Poro, Viking, Tekken, Chameleon, Gpt4o, SuperBpe, Bailing, SeedCoder,
};

std::vector<std::string> regexes_of(Kind k) {
  switch (k) {
    case Kind::Default:
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    case Kind::Gpt2: return {kGpt2};
    case Kind::Llama3: return {kLlama3};
    case Kind::Qwen2: return {kQwen2};
    case Kind::Qwen35: return {kQwen35};
    case Kind::Falcon: return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    case Kind::Starcoder: return {"\\p{N}", kGpt2};
    case Kind::DeepseekLlm:
      return {"[\r\n]", kDeepseekLetters,
              "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
              "\\x{3000}-\\x{3002}]+",
              "\\s+$", kCjk, "\\p{N}+"};
    case Kind::DeepseekCoder: return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"};
    case Kind::Deepseek3:
      return {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
              "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
              "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
    case Kind::Poro: return {kPoro};
    case Kind::Viking: return {kPoro, "\\p{N}"};
    case Kind::Tekken: return {kTekken};
    case Kind::Chameleon:
      return {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
              "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2};
    case Kind::Gpt4o: return {kGpt4o};
    case Kind::SuperBpe: return {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"};
    case Kind::Bailing: return {kBailing};
    case Kind::SeedCoder: return {kSeedCoder};
  }
  return {};
}

struct Entry {
  std::vector<const char*> names;
  Kind kind;
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_bos = false;
};

// Same grouping and flags as llama.cpp's llama_vocab::impl::load.
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {{"default"}, Kind::Default},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       Kind::Llama3, true, true, true},
      {{"deepseek-llm"}, Kind::DeepseekLlm, false},
      {{"deepseek-coder"}, Kind::DeepseekCoder, false},
      {{"deepseek-v3", "hunyuan-dense"}, Kind::Deepseek3, false},
      {{"falcon"}, Kind::Falcon},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
        "mellum", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4"},
       Kind::Gpt2},
      {{"trillion"}, Kind::Gpt2, false},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, Kind::Starcoder},
      {{"command-r", "smollm"}, Kind::Starcoder, false},
      {{"qwen2", "deepseek-r1-qwen", "hunyuan", "grok-2", "solar-open"}, Kind::Qwen2, false},
      {{"stablelm2", "megrez"}, Kind::Qwen2},
      {{"qwen35"}, Kind::Qwen35, false},
      {{"dbrx", "smaug-bpe"}, Kind::Llama3},
      {{"glm4", "chatglm-bpe"}, Kind::Llama3, true, false, false, true},
      {{"poro-chat"}, Kind::Poro, false},
      {{"bloom", "gpt3-finnish"}, Kind::Poro},
      {{"viking"}, Kind::Viking, false},
      {{"tekken"}, Kind::Tekken, false, true, true},
      {{"chameleon"}, Kind::Chameleon, false, false, true},
      {{"gpt-4o", "llama4", "minimax-m2"}, Kind::Gpt4o, false},
      {{"superbpe"}, Kind::SuperBpe, false},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, Kind::Bailing, false},
      {{"seed-coder"}, Kind::SeedCoder, false},
  };
  return t;
}

}  // namespace

std::vector<std::string> supported_pre_tokenizers() {
  std::vector<std::string> names;
  for (const Entry& e : table()) names.insert(names.end(), e.names.begin(), e.names.end());
  return names;
}

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre, const std::string& file) {
  for (const Entry& e : table()) {
    for (const char* n : e.names) {
      if (pre != n) continue;
      PreTokenizerSpec s;
      s.regexes = regexes_of(e.kind);
      s.clean_spaces = e.clean_spaces;
      s.ignore_merges = e.ignore_merges;
      s.add_bos = e.add_bos;
      s.no_bos = e.no_bos;
      return s;
    }
  }
  std::string list;
  for (const std::string& n : supported_pre_tokenizers()) list += (list.empty() ? "" : ", ") + n;
  throw Error(file + ": unsupported tokenizer.ggml.pre '" + pre + "' (supported: " + list + ")");
}

}  // namespace sy
