#include "kernels/cpu/stream_read.h"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sy::cpu {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^
                               _mm256_extract_epi64(x, 2) ^ _mm256_extract_epi64(x, 3));
}
#endif

uint64_t read_scalar(const uint8_t* p, size_t n) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0;
  for (size_t i = 0; i < n / 8; i += 2) {
    a ^= w[i];
    b ^= w[i + 1];
  }
  return a ^ b;
}

}  // namespace

uint64_t stream_read(const uint8_t* data, size_t bytes, ThreadPool& pool) {
  return stream_read(std::vector<ByteSpan>{{data, bytes}}, pool);
}

uint64_t stream_read(const std::vector<ByteSpan>& spans, ThreadPool& pool, size_t* read) {
  // Contiguous 1 MiB chunks handed out dynamically keep every thread streaming.
  const size_t chunk = size_t{1} << 20;
  struct Piece {
    const uint8_t* p;
    size_t n;
  };
  std::vector<Piece> pieces;
  size_t total = 0;
  for (const ByteSpan& s : spans) {
    // The vector loop reads aligned 128-byte steps.
    const auto a = reinterpret_cast<uintptr_t>(s.data);
    const uintptr_t b = (a + 63) & ~uintptr_t{63}, e = (a + s.bytes) & ~uintptr_t{127};
    for (uintptr_t o = b; o + 128 <= e; o += chunk) {
      pieces.push_back({reinterpret_cast<const uint8_t*>(o), std::min<size_t>(chunk, (e - o) & ~size_t{127})});
      total += pieces.back().n;
    }
  }
  if (read) *read = total;
  std::vector<uint64_t> acc(pool.size() * 8, 0);  // padded against false sharing
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
  pool.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t c, int thread) {
    const Piece& pc = pieces[static_cast<size_t>(c)];
#if defined(__x86_64__)
    acc[thread * 8] ^= avx2 ? read_avx2(pc.p, pc.n) : read_scalar(pc.p, pc.n);
#else
    acc[thread * 8] ^= read_scalar(pc.p, pc.n);
#endif
  });
  uint64_t r = 0;
  for (uint64_t a : acc) r ^= a;
  return r;
}

}  // namespace sy::cpu
