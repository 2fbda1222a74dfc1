// switchyard tokenize: text to token ids.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "cli/common.h"
#include "formats/gguf_reader.h"

namespace sy::cli {

void add_tokenize(CLI::App& app) {
  struct Args {
    std::string model, prompt;
    bool ids = false, no_bos = false, no_special = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("tokenize", "Tokenize text with the model's vocabulary");
  c->footer("Example: switchyard tokenize -m model.gguf -p \"Hello world\" --ids");
  c->add_option("-m,--model", a->model, "GGUF model or vocabulary-only file")->required();
  c->add_option("-p,--prompt", a->prompt, "Text to tokenize")->required();
  c->add_flag("--ids", a->ids, "Print only the ids, as a JSON array");
  c->add_flag("--no-bos", a->no_bos, "Do not add the BOS token the model asks for");
  c->add_flag("--no-special", a->no_special, "Treat special-token strings in the text as plain text");
  c->callback([a] {
    // The vocabulary alone: works on vocab-only files and skips binding the weights.
    auto file = GgufFile::open(a->model);
    auto tok = Tokenizer::from_gguf(*file);
    const auto ids = tok->encode(a->prompt, tok->add_bos_default() && !a->no_bos, !a->no_special, tok->add_eos_default());
    if (a->ids) {
      std::printf("%s\n", json_text(ids).c_str());
      return;
    }
    for (int32_t id : ids) {
      std::printf("%6d -> %s\n", id, json_text(tok->token_to_piece(id)).c_str());
    }
  });
}

}  // namespace sy::cli
