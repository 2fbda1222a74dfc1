#include "base/weight_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace sy {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kChunk = size_t{256} << 20;
}  // namespace

void WeightArena::Unmap::operator()(uint8_t* p) const { ::munmap(p, size); }

uint8_t* WeightArena::allocate(size_t bytes, size_t align) {
  auto aligned = [&](uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + align - 1) / align * align);
  };
  if (cursor_ == nullptr || aligned(cursor_) + bytes > cursor_ + left_) {
    // A fresh chunk, 2 MiB aligned so that huge pages can back it.
    const size_t size = (std::max(kChunk, bytes + align) + kHugePage - 1) / kHugePage * kHugePage;
    void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto* p = static_cast<uint8_t*>(raw);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
    // Give back the unaligned head and tail of the reservation.
    if (base > p) ::munmap(p, static_cast<size_t>(base - p));
    const size_t tail = static_cast<size_t>(p + size + kHugePage - (base + size));
    if (tail > 0) ::munmap(base + size, tail);
    ::madvise(base, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
    chunks_.emplace_back(base, Unmap{size});
    cursor_ = base;
    left_ = size;
  }
  uint8_t* p = aligned(cursor_);
  const size_t used = static_cast<size_t>(p - cursor_) + bytes;
  cursor_ += used;
  left_ -= used;
  bytes_ += bytes;
  return p;
}

}  // namespace sy
