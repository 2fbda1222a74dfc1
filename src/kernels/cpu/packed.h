// The packed ("x8") layout of Q4_0 / Q8_0 weights used by the integer kernels.
//
// GGUF stores a row as blocks of 32 values, each with its own f16 scale (Q4_0: 18 bytes,
// Q8_0: 34 bytes). Packing regroups every 8 consecutive blocks (256 values) of a row so
// that one 32-bit lane of a vector belongs to one block all the way through: VNNI u8 x s8
// dot products then accumulate each block's sum in its own lane with no horizontal adds,
// and the group's 8 scales load as one vector in the same lane order. A packed row has
// exactly the bytes of the GGUF row; blocks past the last full group keep the GGUF format.
//
// A group (block i = 0..7 is lane i) has 8 f16 scales and quant vectors of 32 bytes:
//   Q4_0:     4 vectors; vector m holds bytes 4m..4m+3 of every block's quants (lane i:
//             block i), so its low nibbles are values 4m..4m+3 and its high nibbles values
//             16+4m..16+4m+3
//   Q8_0:     8 vectors; vector m holds values 4m..4m+3 of every block, stored biased to
//             unsigned (w + 128) so that sum((w+128) x) - 128 sum(x) is the dot
// Q4_0 nibbles are unsigned already (value = nibble - 8).
// Groups 2p and 2p + 1 are stored as one pair, so that one 512-bit load takes vector m of
// both (a 256-bit load per group and an insert cost the compute-bound kernels ~10%):
//   32 bytes   the 16 scales (group 2p's, then group 2p + 1's)
//   per m      64 bytes: vector m of group 2p, then vector m of group 2p + 1
// An odd last group is stored alone: its 16 bytes of scales, then its vectors.
//
// Activations for packed weights (PackedActivations) are int8 in the matching order: per
// group, 8 vectors of 32 bytes, vector m lane i = values 4m..4m+3 of block i, with the
// vectors of groups 2p and 2p + 1 interleaved (64-byte stride); then per-block scales and
// sums of quants in block order.
//
// For the tile kernels (AMX, kernels that set tile_tokens) the activations are also laid
// out as matrix tiles, 16 token rows at a time ("chunks"): for chunk c and block b (rows
// of whole group pairs only), a tile of 8 rows x 64 bytes whose row k holds, for tokens
// 16c + n (n = 0..15), values 4k..4k+3 of block b (the "VNNI" order of the tile multiply's
// second operand); tokens past the last row are zero. Beside them, the 16 tokens' scales
// of block b as floats.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "base/dtype.h"

namespace sy::cpu {

constexpr int kGroupBlocks = 8;
constexpr int64_t kGroupValues = kGroupBlocks * kQBlock;  // 256

inline bool packable(DType t) { return t == DType::Q4_0 || t == DType::Q8_0; }
inline int64_t packed_groups(int64_t n_values) { return n_values / kGroupValues; }
// Rows of `cols` values of type t have a packed layout: Q4_0 / Q8_0 with a whole group.
inline bool packable(DType t, int64_t cols) { return packable(t) && packed_groups(cols) > 0; }
__attribute__((always_inline)) constexpr int64_t packed_group_bytes(DType t) { return t == DType::Q4_0 ? 144 : 272; }

// Prefetches a group pair's cache lines 2 KiB ahead into L1, for the tiles that stream
// their rows from memory and prefetch at all (kTilePrefetches). 2 KiB was measured best:
// Zen 3 (AVX2) BM_GroupedFfn at one token a median 89% of its probe against 83% at 4 KiB
// (and ~75% with no prefetch); Zen 4 (AVX-512) 1-8 KiB within a few percent of each
// other (docs/journal/performance.md, fifteenth and sixteenth sessions).
constexpr int64_t kPrefetchAheadBytes = 2048;
// The lines of a group pair's bytes starting at p (locality 3: into L1, 2: into L2).
template <DType T, int Locality>
__attribute__((always_inline)) inline void prefetch_pair_lines(const uint8_t* p) {
  constexpr int64_t kPairBytes = 2 * packed_group_bytes(T);
#pragma GCC unroll 9
  for (int64_t off = 0; off < kPairBytes; off += 64) __builtin_prefetch(p + off, 0, Locality);
}
template <DType T>
__attribute__((always_inline)) inline void prefetch_pair_ahead(const uint8_t* pair) {
  prefetch_pair_lines<T, 3>(pair + kPrefetchAheadBytes);
}

// L2 prefetches of the next block of rows, handed out a slice per token tile: the later
// token tiles over a block of rows find it in cache and leave the memory idle, while the
// first tile over the next block would wait on memory at every line. Spread over those
// later tiles, the next block arrives in L2 in time. AVX-512 on Zen 4, 2 threads:
// BM_Matmul Q4_0 (wide tiles) 16 tokens x1.39-1.42, 32 tokens x1.18-1.23 (in-process
// A/B), Q8_0 (8-token tiles) 16 tokens +10%; `bench --batch 16` projections 26 -> 21 ms
// and output head 8.6 -> 6.5 ms per step. (The AVX2 kernels run each token tile over a
// task's whole row range, so there is no next block to hand out.)
struct LinePrefetch {
  const uint8_t* next = nullptr;
  int64_t lines = 0;
  // The next `n` lines of the slice (fewer where it runs out), into L2.
  __attribute__((always_inline)) void issue(int64_t n) {
    for (; n > 0 && lines > 0; --n, --lines, next += 64) __builtin_prefetch(next, 0, 2);
  }
  __attribute__((always_inline)) void issue_all() { issue(lines); }
};
class NextBlockPrefetch {
 public:
  NextBlockPrefetch() = default;  // nothing to prefetch
  // Rows [from, to) of the matrix at w (rows row_bytes apart), in `slices` slices.
  NextBlockPrefetch(const uint8_t* w, size_t row_bytes, int64_t from, int64_t to, int64_t slices)
      : next_(w + from * static_cast<int64_t>(row_bytes)),
        lines_(((to - from) * static_cast<int64_t>(row_bytes) + 63) / 64),
        per_slice_(slices > 0 ? (lines_ + slices - 1) / slices : lines_) {}
  LinePrefetch slice() {
    const int64_t n = std::min(per_slice_, lines_);
    LinePrefetch s{next_, n};
    next_ += 64 * n;
    lines_ -= n;
    return s;
  }

 private:
  const uint8_t* next_ = nullptr;
  int64_t lines_ = 0, per_slice_ = 0;
};

// L2 prefetches of the rows a fixed distance ahead, for the single tiles of 3-8 tokens,
// which read their rows from memory once: the L1 prefetch 2 KiB ahead alone leaves too few
// lines in flight while a row's compute runs; these far lines go to L2, where the near
// prefetch then finds them. Issued a group pair at a time, beside the near prefetch: issued
// a row at a time, the burst cost more than it gained. Clamped to the task's rows, so no
// bytes of another tile or matrix are fetched. 8-32 KiB ahead measured alike; 16 KiB sits
// in the middle. The AVX2 kernels do without (not measured on a Zen 3 host).
constexpr int64_t kRowsAheadBytes = 16384;
class RowsAhead {
 public:
  RowsAhead() = default;  // nothing to prefetch
  // Rows before `end` of a matrix whose rows are row_bytes apart.
  RowsAhead(size_t row_bytes, int64_t end) {
    const int64_t rb = std::max<int64_t>(1, static_cast<int64_t>(row_bytes));
    const int64_t ahead = std::max<int64_t>(1, kRowsAheadBytes / rb);
    bytes_ = ahead * rb;
    last_ = end - ahead;
  }
  // Bytes from row r to the row prefetched beside it; 0 for none.
  int64_t offset(int64_t r) const { return r < last_ ? bytes_ : 0; }

 private:
  int64_t bytes_ = 0, last_ = 0;  // rows before last_ have a row bytes_ on
};
// Up to this many tokens a matmul streams its weights from memory at the memory's pace: its
// tasks are long, even tiles (stream_tile_bytes in matmul.h).
constexpr int64_t kStreamingTokens = 4;
// Whether an AVX-512 tile of NT tokens prefetches its rows (near and far). Tiles of 1-2
// tokens compute too little per byte to need it, and prefetches cost them: each one holds
// an L1 miss buffer until its line arrives, so they leave fewer lines in flight than the
// hardware prefetchers keep for a plain forward stream, and the far ones into L2 cost the
// most. In-process A/B on Zen 4, 2 threads (`bench` decode steps alternating in one run,
// against the near prefetch at every tile and the far one at Q8_0 and from 2 tokens):
//   batch 1: Q4_0 x1.16-1.20 in fast-memory minutes (probe ~65 GB/s), x1.02-1.07 in slow
//   ones (~36 GB/s); Q8_0 x1.25 / x1.06-1.08;
//   batch 4 (tiles of 1-2 tokens): Q4_0 x1.09-1.13 fast, x1.01-1.03 slow; Q8_0 x1.03;
//   batch 16: Q4_0 within +-2% (compute-bound), Q8_0 x1.03-1.05.
// From 3 tokens the prefetches pay again (docs/journal/performance.md, thirty-second session,
// the same kind of A/B, steps or MoE layers alternating in one run): the 3-4-token tiles of
// a 16-sequence step, whose
// experts get ~2.3 tokens each, compute while the next rows arrive. Q4_0 batch 16: MoE
// layer x0.953-0.963 the time in six slow-memory runs, whole step x0.968 (slow) and x0.971 /
// x0.975 (fast); batch 32: step x0.957, MoE x0.934-0.946; batch 4 and 8: steps x0.983 and
// x0.996 (1.00 +- 0.02 is this A/B's noise: batch 1, which it cannot change, read x0.979).
// Q8_0 steps: batch 16 x0.992, batch 4 x0.979. Prefetching from 2 tokens cost batch 4's
// MoE 1.6% and gained nothing more at 16.
// The same rule for the AVX2 tiles (none up to 4 tokens), measured on Zen 4 with
// SY_ISA=avx2, gave batch 1 Q4_0 x1.12-1.14 and Q8_0 x1.25 in fast minutes, but on Zen 3,
// where they run, no prefetch read ~75% of the bandwidth against 89% with it: they keep it.
template <int NT>
constexpr bool kTilePrefetches = NT > 2;
// Everywhere but on Zen 4 (AMD family 25), the AVX-512 tiles of 1-2 tokens prefetch as
// well (near and far). On a Xeon with AMX under KVM (2 threads, BM_GroupedFfn, two builds
// alternating three times) one token's experts read 26.7-28.2 against 24.9-26.6 GB/s, and
// 16 tokens' (~2.3 an expert) 24.7-25.3 against 22.3-23.5. On a Zen 5 EPYC guest (family
// 26; four alternating pairs, one thread) 33-36 against 28-32 and 26-28 against 19-22
// GB/s, and `bench` (six alternating pairs, 2 threads) batch 16 166 against 144 tokens/s
// on average, batch 1 69 against 63 (fifty-first session). The Zen 4 measurements above
// went the other way.
bool small_tiles_prefetch();
// A group pair's lines `far` bytes on, into L2 (nothing when far is 0).
template <DType T>
__attribute__((always_inline)) inline void prefetch_pair_far(const uint8_t* pair, int64_t far) {
  if (far != 0) prefetch_pair_lines<T, 2>(pair + far);
}

// Where group g of a packed row keeps its scales and its quant vector m (Byte: uint8_t to
// write the row, const uint8_t to read it).
template <class Byte>
struct PackedGroupIn {
  Byte* scales;    // 8 f16
  Byte* q;         // vector 0
  int64_t stride;  // bytes from vector m to m + 1
  Byte* vector(int m) const { return q + m * stride; }
};
using PackedGroup = PackedGroupIn<const uint8_t>;

// Always inlined: as a call from a kernel's loop, it costs each group a spill of every
// vector accumulator (no vector register survives a call).
template <class Byte>
__attribute__((always_inline)) inline PackedGroupIn<Byte> packed_group(DType t, Byte* row, int64_t groups, int64_t g) {
  const int64_t gb = packed_group_bytes(t);
  if (g + 1 == groups && groups % 2 == 1) return {row + g * gb, row + g * gb + 16, 32};  // the odd last group
  Byte* pair = row + (g & ~int64_t{1}) * gb;
  const int64_t half = g & 1;
  return {pair + 16 * half, pair + 32 + 32 * half, 64};
}

// One row of n_values from GGUF blocks to the packed layout (dst has the same size).
void pack_row(DType t, const void* src, void* dst, int64_t n_values);
// And back to GGUF blocks (dst: a row of n_values in the GGUF layout; not src).
void unpack_row(DType t, const void* src, void* dst, int64_t n_values);
// And back to floats (tests, embeddings).
void dequantize_packed_row(DType t, const void* src, float* dst, int64_t n_values);

// How far ahead of themselves the AVX-512 tiles of 3-8 tokens (and of 1-2 tokens on Intel)
// prefetch the weight rows they stream: 2 KiB into L1 always, and RowsAhead's 16 KiB into
// L2 as well, or not. The far prefetches pay in the dense matmuls, whose tasks stream long
// matrices, and cost the grouped expert FFN, which streams one expert's matrices after
// another: on a Xeon guest (2 threads), without them BM_GroupedFfn read 78.5% of its probe
// against 75% at 16 tokens and 85-89% against 84-86% at one token, and in `bench` decode
// steps (olmoe Q4_0) the MoE of 16 sequences took 113-118 against 117-121 ms, of 4 and 32
// 1.5% and 2-3% less time, batch 1 and a 64-token prefill unchanged (alternating runs);
// the same with no far prefetches in the dense matmuls too slowed batch 1's projections
// and output head by 12-15% (docs/journal/performance.md, forty-sixth session).
enum class RowPrefetch : uint8_t { kNearAndFar, kNearOnly };

// Token rows quantized to Q8_0 (like llama.cpp's activations) in the packed order.
class PackedActivations {
 public:
  // How the kernels prefetch the weight rows they multiply with these rows.
  void set_row_prefetch(RowPrefetch p) { row_prefetch_ = p; }
  RowPrefetch row_prefetch() const { return row_prefetch_; }

  // Quantizes n rows of `cols` floats (ld apart).
  void quantize(const float* x, int64_t n, int64_t ld, int64_t cols);

  int64_t rows() const { return n_; }
  int64_t groups() const { return groups_; }
  // Group g of row t: 8 vectors of 32 bytes, 64 bytes apart (groups 2p and 2p + 1
  // interleave, so that one 512-bit load takes vector m of both).
  const int8_t* group(int64_t t, int64_t g) const { return q_.data() + t * q_stride_ + group_offset(g); }
  const float* d(int64_t t) const { return d_.data() + t * groups_ * kGroupBlocks; }
  const int32_t* sum(int64_t t) const { return s_.data() + t * groups_ * kGroupBlocks; }
  const BlockQ8_0* tail(int64_t t) const { return tail_.data() + t * tail_blocks_; }

  // The tile layout (see the top of this file): built by quantize() when the dispatched
  // kernels take it (PackedKernels::tile_tokens) at this many rows, and the rows are whole
  // group pairs.
  bool has_tiles() const { return tiled_; }
  static constexpr int64_t kTileRows = 16;     // tokens per chunk
  static constexpr int64_t kTileBytes = 512;   // 8 rows x 64 bytes
  const int8_t* tile(int64_t chunk, int64_t block) const { return tiles_.data() + (chunk * blocks_ + block) * kTileBytes; }
  const float* tile_d(int64_t chunk, int64_t block) const { return tile_d_.data() + (chunk * blocks_ + block) * kTileRows; }

 private:
  static int64_t group_offset(int64_t g) { return (g / 2) * 2 * kGroupValues + (g % 2) * 32; }
  void build_tiles();

  int64_t n_ = 0, cols_ = 0, groups_ = 0, tail_blocks_ = 0;
  int64_t q_stride_ = 0;  // bytes of quants per row: groups rounded up to pairs
  AlignedVector<int8_t> q_;
  AlignedVector<float> d_;
  AlignedVector<int32_t> s_;
  std::vector<BlockQ8_0> tail_;
  bool tiled_ = false;
  RowPrefetch row_prefetch_ = RowPrefetch::kNearAndFar;
  int64_t blocks_ = 0;  // blocks per row in the tile layout
  AlignedVector<int8_t> tiles_;
  AlignedVector<float> tile_d_;
};

// One stream of an interleaved run (PackedKernels::interleaved): rows of matrix a, and of b
// (the same shape and type; null for none) against activations x of at most
// kStreamingTokens rows, results at ya and yb (ldy apart per token).
struct PackedStream {
  const uint8_t* a;
  const uint8_t* b;
  const PackedActivations* x;
  float* ya;
  float* yb;
};

// Packed kernels: y[t * ldy + r] = dot(row r, activation row t) for rows [r0, r1) and
// all activation rows; `w` points at row 0, rows `row_bytes` apart.
struct PackedKernels {
  const char* isa;
  void (*q4_0)(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
               const PackedActivations& x, float* y, int64_t ldy);
  void (*q8_0)(const uint8_t* w, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
               const PackedActivations& x, float* y, int64_t ldy);
  // The same for two matrices of one shape and type (an expert's gate and up) on the same
  // activations: ya from wa, yb from wb, each activation vector loaded once for both.
  void (*q4_0_two)(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                   const PackedActivations& x, float* ya, float* yb, int64_t ldy);
  void (*q8_0_two)(const uint8_t* wa, const uint8_t* wb, size_t row_bytes, int64_t cols, int64_t r0, int64_t r1,
                   const PackedActivations& x, float* ya, float* yb, int64_t ldy);
  // 256 floats (8 blocks) to Q8_0 in the activation order: quants of block i's values
  // 4m..4m+3 at q + 64 m + 4 i, its scale (rounded through f16, as llama.cpp's) at d[i]
  // and the sum of its quants at s[i].
  void (*quantize_group)(const float* x, int8_t* q, float* d, int32_t* s);
  // The first `pairs` group pairs of a row from GGUF blocks to the packed layout; src may
  // be dst (the expert store packs every expert it reads from disk in place).
  void (*pack_pairs)(DType t, const uint8_t* src, uint8_t* dst, int64_t pairs);
  // From this many activation rows on, the kernels read the activations' tile layout
  // (PackedActivations::has_tiles) where it was built; 0: they never do.
  int64_t tile_tokens = 0;
  // Rows [r0, r1) of n streams (n <= kMaxStreams; all of type t, row_bytes apart, `cols`
  // wide) taking row r of each in turn, with each stream's results bit for bit those of
  // q4_0 / q4_0_two (q8_0 / q8_0_two) on it. Experts of few tokens stream their weights
  // with compute to spare or none to spare (3-4 tokens) at ~2 KiB a row: alternating two
  // of them, one's memory stall is the other's compute (nullptr: not taken; the AVX-512
  // tiles take it).
  static constexpr int kMaxStreams = 4;
  void (*interleaved)(const PackedStream* s, int n, DType t, size_t row_bytes, int64_t cols, int64_t r0,
                      int64_t r1, int64_t ldy) = nullptr;
};

// Best for this CPU: AMX tiles, else AVX-512 VNNI, else AVX2, else scalar (SY_ISA=scalar,
// avx2 or avx512 caps it, as for the dots).
const PackedKernels& packed_kernels();
const PackedKernels& packed_kernels_scalar();      // reference
const PackedKernels* packed_kernels_avx2();        // nullptr without AVX2, FMA and F16C
const PackedKernels* packed_kernels_avx512vnni();  // nullptr without AVX-512 VNNI
// AVX-512 VNNI's table with AMX int8 tiles from tile_tokens rows on, giving its results bit
// for bit; nullptr without AMX (or where the OS does not grant the tile state).
const PackedKernels* packed_kernels_amx();
// Every table this CPU runs, scalar first (tests compare each against the reference).
std::vector<const PackedKernels*> packed_kernels_all();

}  // namespace sy::cpu
