// std::vector whose storage starts on a cache line. 512-bit loads that straddle two
// lines issue as two loads; the packed kernels read activations with nothing but such
// loads, and a 16-byte-aligned heap block made every one of them straddle (~40% slower).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace sy {

inline constexpr size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace sy
