// switchyard: one binary, one subcommand per job.
#include <cstdio>

#include "base/error.h"
#include "cli/common.h"

int main(int argc, char** argv) {
  CLI::App app{"switchyard: Mixture-of-Experts inference engine"};
  app.require_subcommand(1);
  app.footer("Run 'switchyard <command> --help' for a command's options and an example.");
  sy::cli::add_generate(app);
  sy::cli::add_logits(app);
  sy::cli::add_tokenize(app);
  sy::cli::add_perplexity(app);
  sy::cli::add_info(app);
  sy::cli::add_bench(app);
  sy::cli::add_serve(app);
  sy::cli::add_loadgen(app);
  sy::cli::add_synth(app);
  sy::cli::add_pack(app);
  sy::cli::add_analyze(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
