#include "cli/version.h"

#include "kernels/cpu/dot.h"
#include "kernels/cpu/packed.h"

namespace sy::cli {

std::string version_line() {
  return std::string("switchyard ") + build_version() + ", kernels " + cpu::dot_kernels().isa + " / " +
         cpu::packed_kernels().isa;
}

}  // namespace sy::cli
