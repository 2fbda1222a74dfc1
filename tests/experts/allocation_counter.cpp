#include "experts/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local int64_t allocations = 0;
}

namespace sy::test {
int64_t allocations_on_this_thread() { return allocations; }
}  // namespace sy::test

// The plain forms only: the aligned ones keep the library's definitions, which pair with
// their own deletes.
void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
