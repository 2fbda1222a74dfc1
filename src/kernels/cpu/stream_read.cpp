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
  // Contiguous 1 MiB chunks handed out dynamically keep every thread streaming.
  const size_t chunk = size_t{1} << 20;
  const int64_t n_chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
  std::vector<uint64_t> acc(pool.size() * 8, 0);  // padded against false sharing
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
  pool.parallel_for(n_chunks, [&](int64_t c, int thread) {
    const size_t off = static_cast<size_t>(c) * chunk;
    const size_t n = std::min(chunk, bytes - off);
#if defined(__x86_64__)
    acc[thread * 8] ^= avx2 ? read_avx2(data + off, n) : read_scalar(data + off, n);
#else
    acc[thread * 8] ^= read_scalar(data + off, n);
#endif
  });
  uint64_t r = 0;
  for (uint64_t a : acc) r ^= a;
  return r;
}

}  // namespace sy::cpu
