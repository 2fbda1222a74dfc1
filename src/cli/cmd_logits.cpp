// switchyard logits: every position's logits as raw little-endian float32 [n_tokens x n_vocab].
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "base/whole_file.h"
#include "cli/common.h"
#include "runtime/session.h"

namespace sy::cli {

void add_logits(CLI::App& app) {
  struct Args {
    ModelArgs m;
    std::string prompt, tokens, out;
    bool no_bos = false, no_special = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("logits", "Write the logits of every input position to a file");
  c->footer("Example: switchyard logits -m model.gguf -p \"Hello world\" -o logits.f32");
  a->m.add_to(*c);
  auto* p = c->add_option("-p,--prompt", a->prompt,
                          "Text, tokenized as generate and tokenize do (BOS as the model's metadata says; special-token "
                          "text such as <s> becomes its token)");
  auto* t = c->add_option("--tokens", a->tokens, "Comma-separated token ids, used as given");
  p->excludes(t);
  c->add_option("-o,--output", a->out, "Output file (raw float32, row-major)")->required();
  c->add_flag("--no-bos", a->no_bos, "Do not add BOS to the prompt text");
  c->add_flag("--no-special", a->no_special,
              "Treat special-token strings in the text as plain text (as the reference logits of "
              "../shared/fixtures were recorded)");
  c->callback([a, p, t] {
    if (!*p && !*t) throw Error("logits: give the input with -p TEXT or --tokens 1,2,3");
    auto model = load_model(a->m);
    const Tokenizer& tok = model->tokenizer();
    const std::vector<int32_t> ids = *t ? parse_token_list(a->tokens, model->hparams().n_vocab)
                                         : tok.encode(a->prompt, tok.add_bos_default() && !a->no_bos, !a->no_special,
                                                      tok.add_eos_default());
    if (ids.empty()) throw Error("logits: the input has no tokens");
    ThreadPool pool(a->m.n_threads());
    Session s(*model, pool, static_cast<int64_t>(ids.size()), a->m.moe());
    s.eval(ids, /*all_logits=*/true);
    write_whole_file(a->out, s.logits(0), sizeof(float) * ids.size() * model->hparams().n_vocab);
    std::fprintf(stderr, "wrote %zu x %lld logits to %s\n", ids.size(), static_cast<long long>(model->hparams().n_vocab), a->out.c_str());
  });
}

}  // namespace sy::cli
