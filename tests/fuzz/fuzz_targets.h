// Entry points that take arbitrary bytes to each parser of untrusted input: model files,
// expert traces, tokenizer text, chat templates and API request bodies. libFuzzer drives
// them (`make fuzz`, fuzz/fuzz_main.cpp); the test suite replays the saved corpus through
// the same functions, so every input a fuzzer once found stays a regression test. A new
// target needs only an entry in targets() and a seed folder tests/fuzz/corpus/<name>.
//
// A target returns normally when the input is handled: accepted, or refused with a
// sy::Error (the clear-message path). Any other exception, a crash or a sanitizer report
// is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sy::fuzz {

using TargetFn = void (*)(const uint8_t* data, size_t size);

struct Target {
  std::string name;  // also the corpus folder: tests/fuzz/corpus/<name>
  TargetFn run;
};

const std::vector<Target>& targets();
// Throws std::invalid_argument for a name that is not in targets().
TargetFn target(const std::string& name);

}  // namespace sy::fuzz
