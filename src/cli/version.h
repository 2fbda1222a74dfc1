// What `switchyard --version` prints: the release and the commit it was built from, which a
// bug report needs (the build writes it, see cmake/write_version.cmake).
#pragma once

#include <string>

namespace sy::cli {

const char* build_version();
// "switchyard 0.1.0 (git abc1234), kernels avx512-bf16 / amx": what --version prints, and
// the first line of bench's and serve's logs, so that every figure names the build it came
// from (a commit with "-dirty" was built with uncommitted changes: an experiment, which
// says nothing about the commit it started from).
std::string version_line();

}  // namespace sy::cli
