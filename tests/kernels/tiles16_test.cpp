// The 16-row tile layout of Q4_0 weights (kernels/cpu/tiles16.h): its packing, its kernels
// against the GGUF-layout dot products, and the promise the engine relies on: a token's
// results are the same bits whatever its batch and whichever tile kernel ran.
#include "kernels/cpu/tiles16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/weight_arena.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/weight_prep.h"
#include "support/random_values.h"

namespace sy::cpu {
namespace {

using test::random_normal;

// rows x cols Q4_0 in the GGUF layout.
std::vector<BlockQ4_0> q4_0_rows(int64_t rows, int64_t cols, uint32_t seed) {
  const auto w = random_normal(rows * cols, seed);
  std::vector<BlockQ4_0> out(rows * cols / kQBlock);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row_q4_0(w.data() + r * cols, out.data() + r * cols / kQBlock, cols);
  return out;
}

std::vector<uint8_t> tiles_of(const std::vector<BlockQ4_0>& gguf, int64_t rows, int64_t cols) {
  const int64_t blocks = cols / kQBlock;
  std::vector<uint8_t> out(rows * blocks * sizeof(BlockQ4_0));
  for (int64_t g = 0; g < rows / kTileRows16; ++g) {
    const BlockQ4_0* src[kTileRows16];
    for (int64_t n = 0; n < kTileRows16; ++n) src[n] = gguf.data() + (g * kTileRows16 + n) * blocks;
    pack_tile16(src, cols, out.data() + g * blocks * kTiles16BlockBytes);
  }
  return out;
}

std::vector<const Tiles16Kernels*> all_tables() {
  std::vector<const Tiles16Kernels*> all{&tiles16_kernels_scalar()};
  for (const Tiles16Kernels* k : {tiles16_kernels_avx512vnni(), tiles16_kernels_amx()})
    if (k) all.push_back(k);
  return all;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(Tiles16, RowsComeBackAsTheirGgufBlocks) {
  const int64_t rows = 32, cols = 320;  // 10 blocks: no whole group pair of the packed layout
  const auto gguf = q4_0_rows(rows, cols, 1);
  const auto tiles = tiles_of(gguf, rows, cols);
  std::vector<BlockQ4_0> row(cols / kQBlock);
  for (int64_t r : {0, 5, 15, 16, 31}) {
    tiles16_row_blocks(tiles.data(), cols, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), gguf.data() + r * cols / kQBlock, row.size() * sizeof(BlockQ4_0)), 0)
        << r;
    std::vector<float> a(cols), b(cols);
    dequantize_row(DType::Q4_0, gguf.data() + r * cols / kQBlock, a.data(), cols);
    dequantize_tiles16_row(tiles.data(), cols, r, b.data());
    EXPECT_EQ(a, b) << r;
  }
}

TEST(Tiles16, PackedRowsUnpackToTheirGgufBlocks) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    for (int64_t cols : {256, 512 + 64, 768 + 32}) {  // group pairs, an odd last group, a tail
      const auto x = random_normal(cols, 3);
      std::vector<uint8_t> gguf(dtype_row_bytes(t, cols)), packed(gguf.size()), back(gguf.size());
      quantize_row(t, x.data(), gguf.data(), cols);
      pack_row(t, gguf.data(), packed.data(), cols);
      unpack_row(t, packed.data(), back.data(), cols);
      EXPECT_EQ(gguf, back) << dtype_name(t) << " cols=" << cols;
    }
  }
}

// Every table against the GGUF-layout dot products of the same quants, and bit for bit
// against the scalar reference, for token counts across the VNNI passes (8) and the AMX
// chunks (16) and their remainders.
TEST(Tiles16, KernelsMatchGgufDotsAndTheReferenceBits) {
  for (int64_t cols : {96, 2048}) {
    const int64_t rows = 48;
    const auto gguf = q4_0_rows(rows, cols, 7);
    const auto tiles = tiles_of(gguf, rows, cols);
    for (int64_t n : {1, 2, 3, 5, 6, 7, 8, 9, 15, 16, 17, 22, 33}) {
      const auto x = random_normal(n * cols, 100 + n);
      Tiles16Activations acts;
      acts.quantize(x.data(), n, cols, cols);
      std::vector<float> ref(n * rows);
      tiles16_kernels_scalar().q4_0(tiles.data(), cols, 0, rows / kTileRows16, acts, 0, n, ref.data(), rows);
      std::vector<BlockQ8_0> xq(cols / kQBlock);
      for (int64_t t = 0; t < n; ++t) {
        quantize_row_q8_0(x.data() + t * cols, xq.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
          const float dot = dot_kernels_scalar().q4_0(gguf.data() + r * cols / kQBlock, xq.data(), cols);
          ASSERT_NEAR(ref[t * rows + r], dot, 1e-4 * (1 + std::fabs(dot))) << "cols=" << cols << " n=" << n;
        }
      }
      for (const Tiles16Kernels* k : all_tables()) {
        std::vector<float> y(n * rows, -1.0f);
        k->q4_0(tiles.data(), cols, 0, rows / kTileRows16, acts, 0, n, y.data(), rows);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(same_bits(y[i], ref[i])) << k->isa << " cols=" << cols << " n=" << n << " i=" << i
                                               << ": " << y[i] << " against " << ref[i];
        }
      }
    }
  }
}

// A token's results alone and inside batches of every size up to 40 (VNNI passes and AMX
// chunks of every shape): the server's batches give a request the bits it gets alone.
TEST(Tiles16, EveryTokenGetsItsOwnBitsInAnyBatch) {
  const Tiles16Kernels* k = tiles16_kernels();
  if (!k) GTEST_SKIP() << "no tile kernels on this CPU";
  const int64_t rows = 32, cols = 512;
  const auto tiles = tiles_of(q4_0_rows(rows, cols, 9), rows, cols);
  const auto x = random_normal(40 * cols, 10);
  Tiles16Activations acts;
  std::vector<std::vector<float>> alone(40, std::vector<float>(rows));
  for (int64_t t = 0; t < 40; ++t) {
    acts.quantize(x.data() + t * cols, 1, cols, cols);
    k->q4_0(tiles.data(), cols, 0, rows / kTileRows16, acts, 0, 1, alone[t].data(), rows);
  }
  for (int64_t n = 2; n <= 40; ++n) {
    acts.quantize(x.data(), n, cols, cols);
    std::vector<float> y(n * rows);
    k->q4_0(tiles.data(), cols, 0, rows / kTileRows16, acts, 0, n, y.data(), rows);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_TRUE(same_bits(y[t * rows + r], alone[t][r])) << k->isa << " n=" << n << " t=" << t;
  }
}

// prepare_weight lays out a matrix in tiles only where allowed and where the CPU runs the
// tile kernels, from GGUF or packed rows alike; matmuls and row lookups then agree with
// the GGUF layout's.
TEST(Tiles16, PreparedMatricesComputeAsTheirGgufRows) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  WeightArena arena;
  const int64_t rows = 64, cols = 512;
  const auto gguf = q4_0_rows(rows, cols, 11);
  const WeightMatrix plain{DType::Q4_0, rows, cols, reinterpret_cast<const uint8_t*>(gguf.data()), "w"};
  const WeightMatrix as_packed = prepare_weight(plain, arena, pool);
  EXPECT_FALSE(as_packed.tiles16);  // not allowed: experts keep the packed layout
  for (const WeightMatrix& src : {plain, as_packed}) {
    const WeightMatrix tiled = prepare_weight(src, arena, pool, /*allow_tiles16=*/true);
    EXPECT_EQ(tiled.tiles16, tiles16_kernels() != nullptr);
    for (int64_t n : {1, 7, 20}) {
      const auto x = random_normal(n * cols, 12 + n);
      std::vector<float> y0(n * rows), y1(n * rows);
      matmul(plain, {x.data(), n, cols}, {y0.data(), rows}, pool, scratch);
      matmul(tiled, {x.data(), n, cols}, {y1.data(), rows}, pool, scratch);
      for (size_t i = 0; i < y0.size(); ++i)
        ASSERT_NEAR(y0[i], y1[i], 1e-4 * (1 + std::fabs(y0[i]))) << "n=" << n;
    }
    std::vector<float> r0(cols), r1(cols);
    weight_row_to_f32(plain, 21, r0.data());
    weight_row_to_f32(tiled, 21, r1.data());
    EXPECT_EQ(r0, r1);
  }
  // Shapes the tiles do not take stay as they were.
  const WeightMatrix ragged{DType::Q4_0, rows - 8, cols, plain.data, "ragged"};
  EXPECT_FALSE(prepare_weight(ragged, arena, pool, true).tiles16);
}

}  // namespace
}  // namespace sy::cpu
