#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <string>

#include "base/error.h"

#include "kernels/cpu/dot.h"
#include "kernels/cpu/quantize.h"

namespace sy::cpu {

void PreparedInput::prepare(const WeightMatrix& w, Rows x, RowPrefetch prefetch) {
  f32_ = x;
  is_packed_ = w.packed;
  if (w.tiles16) {
    tiles16_.quantize(x.data, x.n, x.ld, w.cols);
  } else if (w.packed) {
    packed_.quantize(x.data, x.n, x.ld, w.cols);
    packed_.set_row_prefetch(prefetch);
  } else if (takes_q8_activations(w.dtype)) {
    q8_ld_ = w.cols / kQBlock;
    if (q8_.size() < static_cast<size_t>(q8_ld_ * x.n)) q8_.resize(q8_ld_ * x.n);
    for (int64_t t = 0; t < x.n; ++t) quantize_row_q8_0(x.data + t * x.ld, q8_.data() + t * q8_ld_, w.cols);
  } else if (w.dtype == DType::F16) {
    // Rounded to F16 values, as llama.cpp's CPU backend rounds them for F16 weights.
    if (f16_values_.size() < static_cast<size_t>(w.cols * x.n)) f16_values_.resize(w.cols * x.n);
    const DotKernels& k = dot_kernels();
    for (int64_t t = 0; t < x.n; ++t) k.round_f16(x.data + t * x.ld, f16_values_.data() + t * w.cols, w.cols);
    f32_ = {f16_values_.data(), x.n, w.cols};
  } else if (takes_bf16_activations(w.dtype)) {
    if (bf16_.size() < static_cast<size_t>(w.cols * x.n)) bf16_.resize(w.cols * x.n);
    const DotKernels& k = dot_kernels();
    for (int64_t t = 0; t < x.n; ++t) k.to_bf16(x.data + t * x.ld, bf16_.data() + t * w.cols, w.cols);
  }
}

namespace {

bool float_weights(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Rows [r0, r1) of float weights in tiles of up to kFloatTile rows x kFloatTile tokens,
// over chunks of tokens whose activations (~256 KiB) stay in L2 beside the task's rows of
// weights. A chunk's short tile goes first: the first tile over a block of rows reads the
// rows from memory, where small tiles take them one at a time (dot_avx512.cpp), and the
// full tiles after it find them in L1.
void float_rows(const WeightMatrix& w, const Rows& x, const uint16_t* x_bf16, OutRows y, int64_t r0, int64_t r1) {
  const DotKernels& k = dot_kernels();
  const int64_t n = w.cols;
  const int64_t w_ld = static_cast<int64_t>(w.row_bytes()) / (w.dtype == DType::F32 ? 4 : 2);
  const int64_t x_bytes = n * (w.dtype == DType::BF16 ? 2 : 4);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{256} << 10) / x_bytes / kFloatTile) * kFloatTile;
  for (int64_t t0 = 0; t0 < x.n; t0 += chunk) {
    const int64_t t1 = std::min(x.n, t0 + chunk);
    const int64_t first = (t1 - t0) % kFloatTile == 0 ? kFloatTile : (t1 - t0) % kFloatTile;
    for (int64_t r = r0; r < r1; r += kFloatTile) {
      const int nr = static_cast<int>(std::min<int64_t>(kFloatTile, r1 - r));
      const void* row = w.row(r);
      for (int64_t t = t0; t < t1; t += t == t0 ? first : kFloatTile) {
        const int nt = static_cast<int>(t == t0 ? first : kFloatTile);
        float* out = y.data + t * y.ld + r;
        switch (w.dtype) {
          case DType::F32:
            k.f32(static_cast<const float*>(row), w_ld, nr, x.data + t * x.ld, x.ld, nt, n, out, y.ld, t == t0);
            break;
          case DType::F16:
            k.f16(static_cast<const uint16_t*>(row), w_ld, nr, x.data + t * x.ld, x.ld, nt, n, out, y.ld, t == t0);
            break;
          default:
            k.bf16(static_cast<const uint16_t*>(row), w_ld, nr, x_bf16 + t * n, n, nt, n, out, y.ld, t == t0);
            break;
        }
      }
    }
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, const PreparedInput& in, OutRows y, int64_t r0, int64_t r1) {
  if (w.tiles16) {
    // Tasks are whole tiles: row_tile and even_row_tile cut multiples of 16 rows.
    if (r0 % kTileRows16 != 0 || r1 % kTileRows16 != 0) {
      throw Error("matmul_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") of " + w.name +
                  " cut a 16-row tile");
    }
    tiles16_kernels()->q4_0(w.data, w.cols, r0 / kTileRows16, r1 / kTileRows16, in.tiles16_, 0, in.tiles16_.rows(),
                            y.data, y.ld);
    return;
  }
  if (w.packed) {
    const PackedKernels& k = packed_kernels();
    (w.dtype == DType::Q4_0 ? k.q4_0 : k.q8_0)(w.data, w.row_bytes(), w.cols, r0, r1, in.packed_, y.data, y.ld);
    return;
  }
  if (float_weights(w.dtype)) return float_rows(w, in.f32_, in.bf16_.data(), y, r0, r1);
  // Q8_0 / Q4_0 rows in the GGUF layout (shapes the packed layout does not take).
  const DotKernels& k = dot_kernels();
  const int64_t n = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const void* row = w.row(r);
    for (int64_t t = 0; t < in.f32_.n; ++t) {
      const BlockQ8_0* xq = in.q8_.data() + t * in.q8_ld_;
      y.data[t * y.ld + r] = w.dtype == DType::Q8_0 ? k.q8_0(static_cast<const BlockQ8_0*>(row), xq, n)
                                                    : k.q4_0(static_cast<const BlockQ4_0*>(row), xq, n);
    }
  }
}

void matmul_rows_two(const WeightMatrix& a, const WeightMatrix& b, const PreparedInput& in, OutRows ya, OutRows yb,
                     int64_t r0, int64_t r1) {
  if (a.packed && b.packed && a.dtype == b.dtype && a.cols == b.cols && ya.ld == yb.ld) {
    const PackedKernels& k = packed_kernels();
    (a.dtype == DType::Q4_0 ? k.q4_0_two : k.q8_0_two)(a.data, b.data, a.row_bytes(), a.cols, r0, r1, in.packed_,
                                                        ya.data, yb.data, ya.ld);
    return;
  }
  matmul_rows(a, in, ya, r0, r1);
  matmul_rows(b, in, yb, r0, r1);
}

namespace {
// Whether the kernels can interleave these streams: packed weights of stream 0's shape and
// type throughout, results with one stride, few enough input rows.
bool interleavable(const RowsStream* s, int n) {
  if (packed_kernels().interleaved == nullptr || n > PackedKernels::kMaxStreams) return false;
  const WeightMatrix& w0 = *s[0].a;
  auto like_w0 = [&](const WeightMatrix& w) {
    return w.packed && w.dtype == w0.dtype && w.cols == w0.cols && w.row_bytes() == w0.row_bytes();
  };
  for (int i = 0; i < n; ++i) {
    if (!like_w0(*s[i].a) || !s[i].in->is_packed() || s[i].in->rows() < 1 ||
        s[i].in->rows() > kStreamingTokens || s[i].ya.ld != s[0].ya.ld) {
      return false;
    }
    if (s[i].b && (!like_w0(*s[i].b) || s[i].yb.ld != s[0].ya.ld)) return false;
  }
  return true;
}
}  // namespace

void matmul_rows_interleaved(const RowsStream* s, int n, int64_t r0, int64_t r1) {
  if (n <= 0) return;
  if (!interleavable(s, n)) {
    for (int i = 0; i < n; ++i) {
      if (s[i].b) matmul_rows_two(*s[i].a, *s[i].b, *s[i].in, s[i].ya, s[i].yb, r0, r1);
      else matmul_rows(*s[i].a, *s[i].in, s[i].ya, r0, r1);
    }
    return;
  }
  PackedStream ps[PackedKernels::kMaxStreams];
  for (int i = 0; i < n; ++i) {
    ps[i] = {s[i].a->data, s[i].b ? s[i].b->data : nullptr, &s[i].in->packed_, s[i].ya.data,
             s[i].b ? s[i].yb.data : nullptr};
  }
  const WeightMatrix& w0 = *s[0].a;
  packed_kernels().interleaved(ps, n, w0.dtype, w0.row_bytes(), w0.cols, r0, r1, s[0].ya.ld);
}

int64_t row_tile(const WeightMatrix& w, int64_t bytes) {
  // 256 KiB per task: long enough streams for the hardware prefetcher to ramp up (against
  // 128 KiB, interleaved runs gave batch-1 decode 36.5 -> 44.5 tokens/s and batch 16
  // 101-109 -> 116-125 on olmoe Q4_0).
  const int64_t rows = std::max<int64_t>(16, bytes / std::max<int64_t>(1, static_cast<int64_t>(w.row_bytes())));
  return rows / 16 * 16;
}

int64_t stream_tile_bytes(int64_t job_bytes, int threads) {
  return std::clamp<int64_t>(job_bytes / (2 * std::max(1, threads)), int64_t{128} << 10, int64_t{2} << 20);
}

int64_t even_row_tile(const WeightMatrix& w, int64_t bytes) {
  const int64_t target = row_tile(w, bytes);
  const int64_t tiles = (w.rows + target - 1) / target;
  return std::max<int64_t>(16, ((w.rows + tiles - 1) / tiles + 15) / 16 * 16);
}

namespace {
// Rows per task of w, in a job of job_bytes. Up to 4 tokens a matmul streams its weights:
// tiles as long as the threads allow, cut evenly (in-process A/B, olmoe Q4_0 batch 1, 2
// threads, against 256 KiB tiles with a short remainder: x1.016-1.033 in fast-memory
// minutes, level in slow ones). More tokens keep 256 KiB tiles: the compute-bound matmuls
// (prefill) were tuned on them.
int64_t task_rows(const WeightMatrix& w, Rows x, int64_t job_bytes, int threads) {
  return x.n <= kStreamingTokens ? even_row_tile(w, stream_tile_bytes(job_bytes, threads)) : row_tile(w);
}
}  // namespace

void matmul(const WeightMatrix& w, Rows x, OutRows y, ThreadPool& pool, MatmulScratch& scratch) {
  if (x.n == 0) return;
  PreparedInput& in = scratch.input();
  in.prepare(w, x);
  const int64_t tile = task_rows(w, x, static_cast<int64_t>(w.bytes()), pool.size());
  pool.parallel_for((w.rows + tile - 1) / tile, [&](int64_t c, int) {
    matmul_rows(w, in, y, c * tile, std::min(w.rows, (c + 1) * tile));
  });
}

void matmul_same_input(const std::vector<MatmulTarget>& targets, Rows x, ThreadPool& pool, MatmulScratch& scratch) {
  if (x.n == 0 || targets.empty()) return;
  const WeightMatrix& first = *targets[0].w;
  for (const MatmulTarget& t : targets) {
    if (!t.w->same_layout(first)) {
      for (const MatmulTarget& u : targets) matmul(*u.w, x, u.y, pool, scratch);  // mixed layouts
      return;
    }
  }
  PreparedInput& in = scratch.input();
  in.prepare(first, x);
  std::vector<MatmulTile>& tiles = scratch.tiles();
  tiles.clear();
  int64_t job_bytes = 0;
  for (const MatmulTarget& t : targets) job_bytes += static_cast<int64_t>(t.w->bytes());
  for (const MatmulTarget& t : targets) {
    const int64_t step = task_rows(*t.w, x, job_bytes, pool.size());
    for (int64_t r = 0; r < t.w->rows; r += step) tiles.push_back({t.w, t.y, r, std::min(t.w->rows, r + step)});
  }
  pool.parallel_for(static_cast<int64_t>(tiles.size()), [&](int64_t i, int) {
    matmul_rows(*tiles[i].w, in, tiles[i].y, tiles[i].r0, tiles[i].r1);
  });
}

}  // namespace sy::cpu
