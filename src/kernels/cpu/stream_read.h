// A tuned multi-threaded read of a large buffer: the memory-bandwidth reference that
// decode throughput is compared against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"

namespace sy::cpu {

// Sums every 64-bit word of [data, data + bytes) using all pool threads (so the compiler
// cannot drop the reads); bytes must be a multiple of 4096.
uint64_t stream_read(const uint8_t* data, size_t bytes, ThreadPool& pool);

struct ByteSpan {
  const uint8_t* data;
  size_t bytes;
};

// The same over several buffers as one job (each trimmed to whole 128-byte lines); returns
// the bytes read through `read`.
uint64_t stream_read(const std::vector<ByteSpan>& spans, ThreadPool& pool, size_t* read = nullptr);

}  // namespace sy::cpu
