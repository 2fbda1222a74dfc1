// y = x * W^T for a block of token rows: y[t][r] = dot(W row r, x row t).
//
// The input is first prepared for the weight's kernel (kept as float, rounded to F16 values
// or to BF16, quantized to Q8_0 blocks, in the packed order or for 16-row tiles), once per call; row tiles
// then run on any thread. matmul() does both; the grouped expert executor prepares many
// inputs and schedules the tiles of several matrices in one parallel job.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "base/weight_matrix.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/tiles16.h"

namespace sy::cpu {

struct Rows {
  const float* data;
  int64_t n;   // number of rows (tokens)
  int64_t ld;  // floats between consecutive rows
};

struct OutRows {
  float* data;
  int64_t ld;
};

struct RowsStream;

// Token rows in the form one weight layout's kernel reads. Buffers grow and are reused,
// so steady-state calls do not allocate.
class PreparedInput {
 public:
  // Prepares x for weights like `w` (same dtype, layout and cols); `prefetch`: how packed
  // kernels prefetch w's rows against it (RowPrefetch in packed.h).
  void prepare(const WeightMatrix& w, Rows x, RowPrefetch prefetch = RowPrefetch::kNearAndFar);
  int64_t rows() const { return f32_.n; }
  bool is_packed() const { return is_packed_; }

 private:
  friend void matmul_rows(const WeightMatrix&, const PreparedInput&, OutRows, int64_t, int64_t);
  friend void matmul_rows_two(const WeightMatrix&, const WeightMatrix&, const PreparedInput&, OutRows, OutRows, int64_t,
                              int64_t);
  friend void matmul_rows_interleaved(const RowsStream*, int, int64_t, int64_t);
  Rows f32_{nullptr, 0, 0};
  std::vector<BlockQ8_0> q8_;
  int64_t q8_ld_ = 0;  // blocks per row
  std::vector<float> f16_values_;  // rows of w.cols values rounded to F16 (F16 weights)
  std::vector<uint16_t> bf16_;     // rows of w.cols values (BF16 weights)
  PackedActivations packed_;
  Tiles16Activations tiles16_;
  bool is_packed_ = false;
};

// Rows [r0, r1) of w against every prepared input row; runs on the calling thread.
void matmul_rows(const WeightMatrix& w, const PreparedInput& in, OutRows y, int64_t r0, int64_t r1);
// The same rows of two matrices on one input (gate and up of an expert): one pass over
// the activations for both when they are packed alike, else two matmul_rows.
void matmul_rows_two(const WeightMatrix& a, const WeightMatrix& b, const PreparedInput& in, OutRows ya, OutRows yb,
                     int64_t r0, int64_t r1);

// One of several matmuls whose rows run interleaved: rows of a, and of b (like a; null for
// none), against `in`.
struct RowsStream {
  const WeightMatrix* a;
  const WeightMatrix* b;
  const PreparedInput* in;
  OutRows ya, yb;
};
// Rows [r0, r1) of n streams, each with the results matmul_rows(_two) gives it: row r of
// each in turn where the kernels take it (PackedKernels::interleaved: packed weights of one
// shape and type, at most kStreamingTokens input rows each), else one stream after another.
void matmul_rows_interleaved(const RowsStream* s, int n, int64_t r0, int64_t r1);

// Row tile size used to split a matrix into tasks: about `bytes` of weights (256 KiB by
// default), a multiple of 16 rows.
int64_t row_tile(const WeightMatrix& w, int64_t bytes = int64_t{256} << 10);

// Tile size for streaming one job's matrices (job_bytes in all) from memory at a few
// tokens: as long as keeps `threads` threads busy to the end (two tiles each), between
// 128 KiB and 2 MiB. Every tile starts a stream that the hardware prefetcher has to pick
// up again, so longer tiles pay (see GroupedFfn::make_tiles for the measurements).
int64_t stream_tile_bytes(int64_t job_bytes, int threads);
// Rows per tile that cut w into equal tiles of at most about `bytes` (at least one tile of
// 16 rows; multiples of 16 rows), so that no short remainder tile ends a stream early.
int64_t even_row_tile(const WeightMatrix& w, int64_t bytes);

// Rows [r0, r1) of one matrix: a task of a multi-matrix job.
struct MatmulTile {
  const WeightMatrix* w;
  OutRows y;
  int64_t r0, r1;
};

class MatmulScratch {
 public:
  PreparedInput& input() { return input_; }
  std::vector<MatmulTile>& tiles() { return tiles_; }

 private:
  PreparedInput input_;
  std::vector<MatmulTile> tiles_;  // reused, so steady-state calls do not allocate
};

void matmul(const WeightMatrix& w, Rows x, OutRows y, ThreadPool& pool, MatmulScratch& scratch);

// Several matrices applied to the same input (an attention block's Q, K and V): the
// input is prepared once when their layouts agree, and all row tiles run as one job.
struct MatmulTarget {
  const WeightMatrix* w;
  OutRows y;
};
void matmul_same_input(const std::vector<MatmulTarget>& targets, Rows x, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace sy::cpu
