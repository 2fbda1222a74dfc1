// Counts heap allocations per thread (this test binary replaces the global operator new),
// for tests of code that must not allocate on its hot path.
#pragma once

#include <cstdint>

namespace sy::test {

// operator new calls made by the calling thread since it started.
int64_t allocations_on_this_thread();

}  // namespace sy::test
