// Owns weight copies made at load time (weights converted to a kernel-friendly layout,
// expert cache slots) for as long as the model lives. Allocations are carved out of large
// huge-page chunks (base/huge_pages.h). Untouched chunk tails cost no resident memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/huge_pages.h"

namespace sy {

class WeightArena {
 public:
  // `align` must be a power of two no larger than 2 MiB.
  uint8_t* allocate(size_t bytes, size_t align = 64);
  size_t bytes() const { return bytes_; }
  // The chunks allocations are carved from (to ask how much of them sits on huge pages).
  std::vector<MemoryRange> chunks() const;

 private:
  std::vector<HugePageMemory> chunks_;
  uint8_t* cursor_ = nullptr;
  size_t left_ = 0;
  size_t bytes_ = 0;
};

}  // namespace sy
