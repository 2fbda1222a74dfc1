// switchyard pack: a copy of a Q4_0 / Q8_0 model in the CPU kernels' packed layout.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "cli/common.h"
#include "cli/progress_bar.h"
#include "model/packed_file.h"

namespace sy::cli {

void add_pack(CLI::App& app) {
  struct Args {
    std::string input, output;
    int threads = 0;
    bool no_progress = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "pack", "Write a copy of a Q4_0/Q8_0 model with its weights in the CPU kernels' layout (faster expert cache)");
  c->footer(
      "Q4_0 and Q8_0 weight matrices are regrouped as the integer kernels read them; metadata and other\n"
      "tensors are copied unchanged. switchyard runs the copy with the same results, without repacking\n"
      "at load, and --expert-cache reads its experts from disk straight into their slots. Other GGUF\n"
      "readers (llama.cpp) refuse the copy: its packed tensors have switchyard's own type numbers.\n\n"
      "Example: switchyard pack -m olmoe-q4_0.gguf -o olmoe-q4_0.packed.gguf");
  c->add_option("-m,--model", a->input, "GGUF model to read")->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", a->output, "GGUF file to write (not the input)")->required();
  c->add_option("-t,--threads", a->threads, "Worker threads (default: the CPUs this process may use)")->check(CLI::Range(1, 1024));
  c->add_flag("--no-progress", a->no_progress, "No progress bar");
  c->callback([=] {
    ThreadPool pool(a->threads > 0 ? a->threads : ThreadPool::default_threads());
    ProgressBar bar;
    std::function<void(uint64_t, uint64_t)> progress;
    if (!a->no_progress) progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); };
    const PackStats st = write_packed_model(a->input, a->output, pool, progress);
    const double secs = bar.seconds();
    std::printf("wrote %s: %lld of %lld tensors packed (%.3f GB), %.3f GB in %.1f s\n", a->output.c_str(),
                static_cast<long long>(st.packed), static_cast<long long>(st.tensors), st.packed_bytes / 1e9,
                st.file_bytes / 1e9, secs);
  });
}

}  // namespace sy::cli
