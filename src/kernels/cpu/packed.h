// The packed ("x8") layout of Q4_0 / Q8_0 weights used by the integer kernels.
//
// GGUF stores a row as blocks of 32 values, each with its own f16 scale (Q4_0: 18 bytes,
// Q8_0: 34 bytes). Packing regroups every 8 consecutive blocks (256 values) of a row so
// that the group's 8 scales load as one vector and its quants feed VNNI u8 x s8 dot
// products with no per-block shuffling. A packed row has exactly the bytes of the GGUF
// row; blocks past the last full group keep the GGUF block format.
//
// Group layout (blocks A = 2p, B = 2p + 1 form pair p = 0..3):
//   16 bytes  8 f16 scales in lane order kLaneBlock
//   Q4_0:     4 pairs x 32 bytes: A.q[0..15], B.q[0..15]  (low nibbles = values 0..15)
//   Q8_0:     4 pairs x 64 bytes: A[0..15]^0x80, B[0..15]^0x80, A[16..31]^0x80, B[16..31]^0x80
// Q8_0 quants are stored biased to unsigned (w + 128) so that sum((w+128) x) - 128 sum(x)
// gives the signed dot product; Q4_0 nibbles are unsigned already (value = nibble - 8).
//
// Activations for packed weights (PackedActivations) use the matching order: per group
// and pair, x[A 0..15], x[B 0..15], x[A 16..31], x[B 16..31], with per-block scales and
// sums of quants in lane order.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"

namespace sy::cpu {

constexpr int kGroupBlocks = 8;
constexpr int64_t kGroupValues = kGroupBlocks * kQBlock;  // 256
// Block index (within a group) of each result lane after the kernels' reduction.
constexpr int kLaneBlock[kGroupBlocks] = {0, 2, 4, 6, 1, 3, 5, 7};

inline bool packable(DType t) { return t == DType::Q4_0 || t == DType::Q8_0; }
inline int64_t packed_groups(int64_t n_values) { return n_values / kGroupValues; }
inline int64_t packed_group_bytes(DType t) { return t == DType::Q4_0 ? 144 : 272; }

// One row of n_values from GGUF blocks to the packed layout (dst has the same size).
void pack_row(DType t, const void* src, void* dst, int64_t n_values);
// And back to floats (tests, embeddings).
void dequantize_packed_row(DType t, const void* src, float* dst, int64_t n_values);

// Token rows quantized to Q8_0 (like llama.cpp's activations) in the packed order.
class PackedActivations {
 public:
  // Quantizes n rows of `cols` floats (ld apart).
  void quantize(const float* x, int64_t n, int64_t ld, int64_t cols);

  int64_t rows() const { return n_; }
  int64_t groups() const { return groups_; }
  const int8_t* q(int64_t t) const { return q_.data() + t * groups_ * kGroupValues; }
  const float* d(int64_t t) const { return d_.data() + t * groups_ * kGroupBlocks; }  // lane order
  const int32_t* sum(int64_t t) const { return s_.data() + t * groups_ * kGroupBlocks; }
  const BlockQ8_0* tail(int64_t t) const { return tail_.data() + t * tail_blocks_; }

 private:
  int64_t n_ = 0, cols_ = 0, groups_ = 0, tail_blocks_ = 0;
  std::vector<int8_t> q_;
  std::vector<float> d_;
  std::vector<int32_t> s_;
  std::vector<BlockQ8_0> tail_;
};

// Packed kernels: y[t * ldy + r] = dot(row r, activation row t) for rows [r0, r1) and
// all activation rows; `w` points at row 0, rows `row_bytes` apart.
struct PackedKernels {
  const char* isa;
  void (*q4_0)(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
               const PackedActivations& x, float* y, int64_t ldy);
  void (*q8_0)(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
               const PackedActivations& x, float* y, int64_t ldy);
};

const PackedKernels& packed_kernels();          // best for this CPU
const PackedKernels& packed_kernels_scalar();   // reference
const PackedKernels* packed_kernels_avx512vnni();  // nullptr without AVX-512 VNNI

}  // namespace sy::cpu
