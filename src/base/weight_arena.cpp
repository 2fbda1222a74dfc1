#include "base/weight_arena.h"

#include <algorithm>

namespace sy {
namespace {
constexpr size_t kChunk = size_t{256} << 20;
}  // namespace

uint8_t* WeightArena::allocate(size_t bytes, size_t align) {
  auto aligned = [&](uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + align - 1) / align * align);
  };
  if (cursor_ == nullptr || aligned(cursor_) + bytes > cursor_ + left_) {
    chunks_.emplace_back(std::max(kChunk, bytes + align));
    cursor_ = chunks_.back().data();
    left_ = chunks_.back().size();
  }
  uint8_t* p = aligned(cursor_);
  const size_t used = static_cast<size_t>(p - cursor_) + bytes;
  cursor_ += used;
  left_ -= used;
  bytes_ += bytes;
  return p;
}

std::vector<MemoryRange> WeightArena::chunks() const {
  std::vector<MemoryRange> out;
  for (const HugePageMemory& c : chunks_) out.push_back({c.data(), c.size()});
  return out;
}

}  // namespace sy
