#include "fuzz/fuzz_targets.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "base/error.h"
#include "experts/trace.h"
#include "formats/gguf_reader.h"
#include "model/model.h"
#include "server/chat_template.h"
#include "server/loadgen_replies.h"
#include "server/openai.h"
#include "server/tokenize_api.h"
#include "tokenizer/tokenizer.h"

namespace sy::fuzz {
namespace {

// The readers take a path: the bytes go into an anonymous memory file, named through
// /proc/self/fd so that nothing touches the disk.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("sy_fuzz", 0)) {
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) throw std::runtime_error("memfd write failed");
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Tokenizers loaded once per process: the bundled model's (SentencePiece) and the GPT-2
// style byte-level BPE of a synthesized seed model (pre-tokenizer regexes).
const Tokenizer& spm_tokenizer() {
  static const auto tok =
      Tokenizer::from_gguf(*GgufFile::open(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf"));
  return *tok;
}
const Tokenizer& bpe_tokenizer() {
  static const auto tok = Tokenizer::from_gguf(
      *GgufFile::open(std::string(SY_SOURCE_DIR) + "/tests/fuzz/corpus/gguf/olmoe-tiny-q4_0.gguf"));
  return *tok;
}

// A model file: the reader (header, metadata, tensor infos), the tokenizer built from its
// metadata on a fixed text, then the whole model load.
void gguf_file(const uint8_t* data, size_t size) {
  const MemoryFile f(data, size);
  std::unique_ptr<GgufFile> g;
  try {
    g = GgufFile::open(f.path());
  } catch (const Error&) {
    return;
  }
  for (const auto& [key, value] : g->metadata()) (void)g->find(key);
  for (const auto& t : g->tensors()) (void)g->find_tensor(t.name);
  try {
    const auto tok = Tokenizer::from_gguf(*g);
    (void)tok->decode(tok->encode("Hello world <s> 123 \xc3\xbcn\xc3\xaf \xe4\xb8\xad", true, true));
  } catch (const Error&) {
  }
  try {
    (void)Model::load(f.path());
  } catch (const Error&) {
  }
}

void expert_trace(const uint8_t* data, size_t size) {
  const MemoryFile f(data, size);
  try {
    (void)read_trace(f.path());
  } catch (const Error&) {
  }
}

// The first byte picks the options (bit 0: BOS, 1: special tokens, 2: the BPE tokenizer),
// the rest is text.
void tokenizer_text(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const Tokenizer& tok = data[0] & 4 ? bpe_tokenizer() : spm_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto ids = tok.encode(text, data[0] & 1, data[0] & 2);
    (void)tok.decode(ids);
  } catch (const Error&) {
  }
  // The bytes again as token ids, in and out of range.
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 4 <= size; i += 4) {
    int32_t id;
    std::memcpy(&id, data + i, 4);
    ids.push_back(id);
  }
  try {
    (void)tok.decode(ids);
  } catch (const Error&) {
  }
}

// A template text: detected, its variant read (chat_style.cpp), then rendered for a
// conversation with every role and for one that ends with a reply.
void chat_template(const uint8_t* data, size_t size) {
  const std::string jinja(reinterpret_cast<const char*>(data), size);
  const ChatTemplate t = ChatTemplate::detect(jinja, "<s>", "</s>");
  if (!t.supported()) return;
  try {
    (void)t.render({{"system", "Be brief."}, {"user", jinja}, {"assistant", "Yes."}, {"user", "And?"}});
    (void)t.render({{"user", ""}}, false);
    (void)t.render({{"user", "Hi"}, {"assistant", " Hello "}}, false);
  } catch (const Error&) {
  }
}

// A request body for the two completion endpoints (parsed against the bundled model's
// tokenizer) and for /tokenize and /detokenize.
void api_request(const uint8_t* data, size_t size) {
  static const ChatTemplate chat = ChatTemplate::detect("", "<s>", "</s>");
  ApiContext ctx;
  ctx.tok = &spm_tokenizer();
  ctx.chat = &chat;
  ctx.model_id = "tiny-mixtral-f16";
  ctx.ctx_size = 256;
  const std::string body(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = parse_json_body(body);
  } catch (const Error&) {
    return;
  }
  for (Endpoint ep : {Endpoint::Completions, Endpoint::Chat}) {
    try {
      (void)parse_completion_request(j, ep, ctx);
    } catch (const Error&) {
    }
  }
  // The same body to /tokenize and /detokenize, on both tokenizers (the BPE one has no
  // SentencePiece byte fallback, so odd ids and bytes take other paths).
  for (const Tokenizer* tok : {&spm_tokenizer(), &bpe_tokenizer()}) {
    try {
      (void)tokenize_response(j, *tok, ctx.model_id, ctx.ctx_size);
    } catch (const Error&) {
    }
    try {
      (void)detokenize_response(j, *tok, ctx.model_id);
    } catch (const Error&) {
    }
  }
}

// What `loadgen` reads from a server: the bytes as a stream event, an error body, a
// /tokenize reply and a model list.
void loadgen_reply(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)parse_stream_event(text);
  (void)error_message_of(text);
  try {
    (void)parse_tokenize_reply(text);
  } catch (const Error&) {
  }
  for (const char* wanted : {"", "tiny-mixtral-f16"}) {
    try {
      (void)parse_models_reply(text, wanted, 32000);
    } catch (const Error&) {
    }
  }
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"gguf", gguf_file},           {"trace", expert_trace},
      {"tokenizer", tokenizer_text}, {"chat_template", chat_template},
      {"api_request", api_request},  {"loadgen_reply", loadgen_reply},
  };
  return all;
}

TargetFn target(const std::string& name) {
  for (const Target& t : targets()) {
    if (t.name == name) return t.run;
  }
  throw std::invalid_argument("no fuzz target named '" + name + "'");
}

}  // namespace sy::fuzz
