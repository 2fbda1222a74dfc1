// Owns weight copies made at load time (weights converted to a kernel-friendly layout,
// expert cache slots) for as long as the model lives. Allocations are carved out of large
// chunks backed by transparent huge pages where the kernel allows it: streaming gigabytes
// of weights through 4 KiB pages costs a TLB walk per page and stops the hardware
// prefetcher at every page boundary. Untouched chunk tails cost no resident memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace sy {

class WeightArena {
 public:
  // `align` must be a power of two no larger than 2 MiB.
  uint8_t* allocate(size_t bytes, size_t align = 64);
  size_t bytes() const { return bytes_; }

 private:
  struct Chunk {
    uint8_t* base;
    size_t size;
  };
  struct Unmap {
    size_t size;
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, Unmap>> chunks_;
  uint8_t* cursor_ = nullptr;
  size_t left_ = 0;
  size_t bytes_ = 0;
};

}  // namespace sy
