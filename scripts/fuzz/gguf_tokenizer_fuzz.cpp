// libFuzzer target for the parsers that read untrusted files: a GGUF file (header,
// metadata, tensor infos) and the tokenizer built from its metadata, which then encodes and
// decodes a fixed text. Any crash, leak or sanitizer report is a bug; sy::Error is the
// expected way to reject a bad file. Built and run by scripts/fuzz-parsers.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // GgufFile maps a path: write the input to memory-backed storage.
  static const std::string path = "/dev/shm/sy-fuzz-" + std::to_string(getpid()) + ".gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto gguf = sy::GgufFile::open(path);
    auto tok = sy::Tokenizer::from_gguf(*gguf);
    const auto ids = tok->encode("Hello world <s> 123 \xc3\xbcn\xc3\xaf \xe4\xb8\xad", true, true);
    (void)tok->decode(ids);
  } catch (const sy::Error&) {
  }
  return 0;
}
