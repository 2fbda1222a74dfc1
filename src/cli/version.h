// What `switchyard --version` prints: the release and the commit it was built from, which a
// bug report needs (the build writes it, see cmake/write_version.cmake).
#pragma once

namespace sy::cli {

const char* build_version();

}  // namespace sy::cli
