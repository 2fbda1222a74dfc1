// switchyard: one binary, one subcommand per job.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "cli/common.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  CLI::App app{"switchyard: Mixture-of-Experts inference engine", "switchyard"};
  app.set_version_flag("--version", sy::cli::version_line());
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
  if (argc == 1) {  // no command at all: what there is to run, rather than an error
    std::fputs(app.help().c_str(), stderr);
    return 1;
  }
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
