#include "base/huge_pages.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace sy {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void touch_pages(void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 4096) static_cast<volatile uint8_t*>(p)[off] = 0;
}

HugePageMemory::HugePageMemory(size_t bytes, bool prefault) {
  if (bytes == 0) return;
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-reserve by one huge page, then give back the unaligned head and tail.
  void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* p = static_cast<uint8_t*>(raw);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
  if (base > p) ::munmap(p, static_cast<size_t>(base - p));
  const size_t tail = static_cast<size_t>(p + size + kHugePage - (base + size));
  if (tail > 0) ::munmap(base + size, tail);
  ::madvise(base, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
  data_ = base;
  size_ = size;
  if (prefault) touch_pages(base, size);
}

HugePageMemory::~HugePageMemory() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

HugePageMemory& HugePageMemory::operator=(HugePageMemory&& o) noexcept {
  if (this != &o) {
    HugePageMemory old(std::move(*this));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace sy
