// Owns weight copies made at load time (weights converted to a kernel-friendly layout),
// in aligned buffers (64 bytes by default; 4096 for direct I/O) that live as long as the
// model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace sy {

class WeightArena {
 public:
  uint8_t* allocate(size_t bytes, size_t align = 64) {
    void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
    buffers_.emplace_back(static_cast<uint8_t*>(p));
    bytes_ += bytes;
    return static_cast<uint8_t*>(p);
  }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
  size_t bytes_ = 0;
};

}  // namespace sy
