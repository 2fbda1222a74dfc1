// libFuzzer entry for the targets of tests/fuzz/fuzz_targets.h; the environment variable
// SY_FUZZ_TARGET names the one to run (`make fuzz` runs each in turn).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_targets.h"

namespace {

sy::fuzz::TargetFn chosen_target() {
  const char* name = std::getenv("SY_FUZZ_TARGET");
  try {
    return sy::fuzz::target(name ? name : "");
  } catch (const std::invalid_argument&) {
    std::string names;
    for (const auto& t : sy::fuzz::targets()) names += " " + t.name;
    std::fprintf(stderr, "set SY_FUZZ_TARGET to one of:%s\n", names.c_str());
    std::exit(2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sy::fuzz::TargetFn run = chosen_target();
  run(data, size);
  return 0;
}
