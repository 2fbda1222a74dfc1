#include "experts/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local int64_t allocations = 0;

void* counted(std::size_t n) noexcept {
  ++allocations;
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace

namespace sy::test {
int64_t allocations_on_this_thread() { return allocations; }
}  // namespace sy::test

// Every unaligned form, so that no allocation made by the library's operator new is freed
// by these deletes (AddressSanitizer checks the pairing); the aligned forms keep the
// library's definitions, which pair with their own deletes.
void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
