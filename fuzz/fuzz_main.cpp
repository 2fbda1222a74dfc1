// libFuzzer entry for one target of tests/fuzz/fuzz_targets.h, chosen at build time
// (SY_FUZZ_TARGET, a string); see `make fuzz`.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sy::fuzz::TargetFn run = sy::fuzz::target(SY_FUZZ_TARGET);
  run(data, size);
  return 0;
}
