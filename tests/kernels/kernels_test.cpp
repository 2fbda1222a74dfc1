// Dispatched kernels against the scalar reference, on odd shapes and every type.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>
#include <tuple>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/stream_read.h"
#include "kernels/cpu/weight_prep.h"
#include "support/random_values.h"

namespace sy::cpu {
namespace {

using test::random_normal;

std::vector<uint8_t> encode(DType t, const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(dtype_row_bytes(t, cols) * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, v.data() + r * cols, out.data() + r * dtype_row_bytes(t, cols), cols);
  return out;
}

TEST(Kernels, QuantizeRoundTrip) {
  const auto v = random_normal(96, 1);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const auto q = encode(t, v, 1, 96);
    std::vector<float> back(96);
    dequantize_row(t, q.data(), back.data(), 96);
    const double tol = t == DType::Q4_0 ? 0.25 : t == DType::Q8_0 ? 0.02 : t == DType::BF16 ? 0.02 : 1e-3;
    for (int i = 0; i < 96; ++i) EXPECT_NEAR(back[i], v[i], tol * (1 + std::fabs(v[i]))) << dtype_name(t) << " " << i;
  }
}

// Every table this CPU can run (the dispatched one, and AVX2 beneath AVX-512 BF16).
std::vector<const DotKernels*> vector_dot_tables() {
  std::vector<const DotKernels*> out = {&dot_kernels()};
  if (const DotKernels* k = dot_kernels_avx2(); k && k != out[0]) out.push_back(k);
  return out;
}

TEST(Kernels, DispatchedDotMatchesScalar) {
  const DotKernels& ref = dot_kernels_scalar();
  for (const DotKernels* k : vector_dot_tables()) {
    const DotKernels& fast = *k;
    SCOPED_TRACE(fast.isa);
    for (int64_t n : {32, 64, 96, 160, 256, 4096 + 32}) {
      const auto w = random_normal(n, 2), x = random_normal(n, 3);
      std::vector<BlockQ8_0> xq(n / 32);
      quantize_row_q8_0(x.data(), xq.data(), n);
      const auto w8 = encode(DType::Q8_0, w, 1, n), w4 = encode(DType::Q4_0, w, 1, n);
      const double tol = 1e-4 * n;
      auto q8 = reinterpret_cast<const BlockQ8_0*>(w8.data());
      EXPECT_NEAR(fast.q8_0(q8, xq.data(), n), ref.q8_0(q8, xq.data(), n), tol) << n;
      auto q4 = reinterpret_cast<const BlockQ4_0*>(w4.data());
      EXPECT_NEAR(fast.q4_0(q4, xq.data(), n), ref.q4_0(q4, xq.data(), n), tol) << n;
    }
  }
}

// Random values with special ones in every third place, for the activation roundings, and
// every table that rounds them.
std::vector<float> rounding_inputs(uint32_t seed, std::initializer_list<uint32_t> special) {
  std::vector<float> x = random_normal(77, seed);
  size_t i = 0;
  for (const uint32_t bits : special) x[3 * i++] = f32_from_bits(bits);
  return x;
}

std::vector<const DotKernels*> every_dot_table() {
  std::vector<const DotKernels*> tables = vector_dot_tables();
  tables.push_back(&dot_kernels_scalar());
  return tables;
}

// F16 rounding of activations (for F16 weights): every table gives f32_to_f16's value,
// ties to even, with overflow to infinity, subnormals and NaN as the scalar conversion has them.
TEST(Kernels, RoundF16MatchesTheScalarRounding) {
  const std::vector<float> x = rounding_inputs(13, {0x3f801000u, 0x3f803000u, 0x477ff000u, 0x477fefffu, 0xc77ff000u,
                                                    0x7f800000u, 0x33000001u, 0x38800000u, 0x387fe000u, 0x7fc00000u,
                                                    0x00000001u, 0x80000000u});
  for (const DotKernels* k : every_dot_table()) {
    std::vector<float> y(x.size());
    k->round_f16(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = f16_to_f32(f32_to_f16(x[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i])) << k->isa << " " << i;
      } else {
        EXPECT_EQ(bits_from_f32(y[i]), bits_from_f32(want)) << k->isa << " " << i << " " << x[i];
      }
    }
  }
}

// BF16 rounding of activations: every table gives f32_to_bf16's bits, ties to even, on
// infinities, NaNs (kept quiet), the largest finite values and lengths with a tail.
TEST(Kernels, ToBf16MatchesTheScalarRounding) {
  const std::vector<float> x = rounding_inputs(12, {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu,
                                                    0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu,
                                                    0x00000001u, 0x80000000u});
  for (const DotKernels* k : every_dot_table()) {
    std::vector<uint16_t> y(x.size());
    k->to_bf16(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], f32_to_bf16(x[i])) << k->isa << " " << i;
  }
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);  // a tie goes to even
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f800001u)) & 0x7fc0, 0x7fc0);  // a NaN stays a NaN
}

// The float-weight tiles of every table (F32, F16, BF16 rows, ld apart): every (row,
// token) against a sum in double of the same rounded inputs, on lengths that are not
// multiples of any vector width; and each result has the same bits whatever the tile's
// shape, so that a token's result does not depend on the batch around it.
TEST(Kernels, FloatTilesMatchSumsWhateverTheTileShape) {
  for (const DotKernels* k : every_dot_table()) {
    for (int64_t n : {1, 7, 16, 33, 101, 160, 300, 2048 + 37}) {
      const int64_t w_ld = n + 3, x_ld = n + 5, ld = 6;
      const auto w = random_normal(kFloatTile * w_ld, 4), x = random_normal(kFloatTile * x_ld, 5);
      std::vector<uint16_t> wh(w.size()), wb(w.size()), xb(x.size());
      for (size_t i = 0; i < w.size(); ++i) wh[i] = f32_to_f16(w[i]), wb[i] = f32_to_bf16(w[i]);
      for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
      for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        SCOPED_TRACE(std::string(k->isa) + " " + dtype_name(t) + " n=" + std::to_string(n));
        auto run = [&](int nr, int nt, float* out, bool cold) {
          if (t == DType::F32) k->f32(w.data(), w_ld, nr, x.data(), x_ld, nt, n, out, ld, cold);
          else if (t == DType::F16) k->f16(wh.data(), w_ld, nr, x.data(), x_ld, nt, n, out, ld, cold);
          else k->bf16(wb.data(), w_ld, nr, xb.data(), x_ld, nt, n, out, ld, cold);
        };
        auto weight = [&](int64_t i) {
          return t == DType::F32 ? w[i] : t == DType::F16 ? f16_to_f32(wh[i]) : bf16_to_f32(wb[i]);
        };
        auto input = [&](int64_t i) { return t == DType::BF16 ? bf16_to_f32(xb[i]) : x[i]; };
        std::vector<float> full(kFloatTile * ld, -7.0f);
        run(kFloatTile, kFloatTile, full.data(), false);
        for (int tk = 0; tk < kFloatTile; ++tk) {
          for (int r = 0; r < kFloatTile; ++r) {
            double want = 0;
            for (int64_t i = 0; i < n; ++i) want += double{weight(r * w_ld + i)} * input(tk * x_ld + i);
            EXPECT_NEAR(full[tk * ld + r], want, 2e-6 * n) << "row " << r << " token " << tk;
          }
        }
        for (int nr = 1; nr <= kFloatTile; ++nr) {
          for (int nt = 1; nt <= kFloatTile; ++nt) {
            for (bool cold : {false, true}) {  // with and without prefetching the next rows
              std::vector<float> out(kFloatTile * ld, -7.0f);
              run(nr, nt, out.data(), cold);
              for (int tk = 0; tk < kFloatTile; ++tk) {
                for (int r = 0; r < ld; ++r) {
                  const float want = tk < nt && r < nr ? full[tk * ld + r] : -7.0f;
                  EXPECT_EQ(out[tk * ld + r], want)
                      << "nr=" << nr << " nt=" << nt << " cold=" << cold << " row " << r << " token " << tk;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The attention row kernels: one cached row (KV heads side by side, grouped query heads)
// against every head, on head sizes that are not multiples of the vector width.
// The prefill tiles (query rows x 4 positions of one head), dispatched and scalar, f32
// and f16 rows, every partial tile shape and head sizes with a remainder: against sums in
// double; scores past nk and rows past nq are left alone.
TEST(Kernels, AttentionTileKernelsMatchSums) {
  const int64_t ld = 5;
  for (int64_t d : {8, 64, 100, 128}) {
    const int64_t q_ld = d + 3, o_ld = d + 1;
    const auto q = random_normal(3 * q_ld, 71), kv = random_normal(4 * d, 72), w = random_normal(3 * ld, 73);
    std::vector<uint16_t> kh(kv.size());
    for (size_t i = 0; i < kv.size(); ++i) kh[i] = f32_to_f16(kv[i]);
    const float* kf[4];
    const uint16_t* k16[4];
    for (int j = 0; j < 4; ++j) kf[j] = kv.data() + j * d, k16[j] = kh.data() + j * d;
    for (const DotKernels* kk : {&dot_kernels(), &dot_kernels_scalar()}) {
      for (bool f16 : {false, true}) {
        auto key = [&](int j, int64_t x) { return f16 ? f16_to_f32(kh[j * d + x]) : kv[j * d + x]; };
        for (int64_t nq = 1; nq <= 3; ++nq) {
          for (int nk = 1; nk <= 4; ++nk) {
            std::vector<float> out(3 * ld, -7.0f);
            if (f16) kk->dot_tile_f16(q.data(), q_ld, nq, k16, nk, d, 0.25f, out.data(), ld, {});
            else kk->dot_tile(q.data(), q_ld, nq, kf, nk, d, 0.25f, out.data(), ld, {});
            for (int64_t i = 0; i < 3; ++i) {
              for (int64_t j = 0; j < ld; ++j) {
                double want = -7.0;
                if (i < nq && j < nk) {
                  want = 0;
                  for (int64_t x = 0; x < d; ++x) want += double{q[i * q_ld + x]} * key(static_cast<int>(j), x);
                  want *= 0.25;
                }
                EXPECT_NEAR(out[i * ld + j], want, 1e-4 * d) << kk->isa << " f16=" << f16 << " d=" << d << " " << i << "," << j;
              }
            }
            std::vector<float> o(3 * o_ld);
            for (int64_t i = 0; i < 3; ++i) std::fill(o.begin() + i * o_ld, o.begin() + (i + 1) * o_ld, 1.0f + i);
            if (f16) kk->axpy_tile_f16(w.data(), ld, nq, k16, nk, d, o.data(), o_ld, {});
            else kk->axpy_tile(w.data(), ld, nq, kf, nk, d, o.data(), o_ld, {});
            for (int64_t i = 0; i < 3; ++i) {
              for (int64_t x = 0; x < o_ld; ++x) {
                double want = 1.0 + i;
                if (i < nq && x < d)
                  for (int j = 0; j < nk; ++j) want += double{w[i * ld + j]} * key(j, x);
                EXPECT_NEAR(o[i * o_ld + x], want, 1e-5) << kk->isa << " f16=" << f16 << " d=" << d << " nq=" << nq << " nk=" << nk;
              }
            }
          }
        }
      }
    }
  }
}

// The same tiles over several heads in one call, grouped query heads (4 heads on 2 KV
// heads), with the scores of each head `scores_ld` apart, for a decode row (whose heads
// the AVX2 tiles take two at a time) and for three prompt rows: against sums in double,
// and bit for bit what one call per head gives, so a row's scores do not depend on the
// path that computed them.
TEST(Kernels, AttentionTilesCoverEveryHead) {
  const int nh = 4, group = 2;
  const int64_t ld = 5;
  for (const auto& [nq, nk, d] : {std::tuple<int64_t, int, int64_t>{1, 4, 128}, {1, 3, 40}, {3, 4, 40}, {3, 3, 128}}) {
    const int64_t s_ld = nq * ld + 2;
    const int64_t kv_w = nh / group * d, q_ld = nh * d + 3, o_ld = nh * d + 1;
    const auto q = random_normal(nq * q_ld, 81), kv = random_normal(nk * kv_w, 82), w = random_normal(nh * s_ld, 83);
    std::vector<uint16_t> kh(kv.size());
    for (size_t i = 0; i < kv.size(); ++i) kh[i] = f32_to_f16(kv[i]);
    const float* kf[4];
    const uint16_t* k16[4];
    for (int j = 0; j < nk; ++j) kf[j] = kv.data() + j * kv_w, k16[j] = kh.data() + j * kv_w;
    const TileHeads heads{nh, group, s_ld};
    for (const DotKernels* kk : {&dot_kernels(), &dot_kernels_scalar()}) {
      for (bool f16 : {false, true}) {
        auto cached = [&](int j, int h, int64_t x) {
          const size_t at = static_cast<size_t>(j * kv_w + h / group * d + x);
          return f16 ? double{f16_to_f32(kh[at])} : double{kv[at]};
        };
        auto dot = [&](const float* qq, int64_t qq_ld, const void* const* kr, float* out, int64_t out_ld, TileHeads hs) {
          if (f16) kk->dot_tile_f16(qq, qq_ld, nq, reinterpret_cast<const uint16_t* const*>(kr), nk, d, 0.5f, out, out_ld, hs);
          else kk->dot_tile(qq, qq_ld, nq, reinterpret_cast<const float* const*>(kr), nk, d, 0.5f, out, out_ld, hs);
        };
        auto axpy = [&](const float* ww, const void* const* vr, float* out, TileHeads hs) {
          if (f16) kk->axpy_tile_f16(ww, ld, nq, reinterpret_cast<const uint16_t* const*>(vr), nk, d, out, o_ld, hs);
          else kk->axpy_tile(ww, ld, nq, reinterpret_cast<const float* const*>(vr), nk, d, out, o_ld, hs);
        };
        // Every KV head's rows (h < 0), or head h's part of them, as the kernels take them.
        auto rows_of_head = [&](int h, const void* out[4]) {
          const int64_t at = h < 0 ? 0 : h / group * d;
          for (int j = 0; j < nk; ++j) out[j] = f16 ? static_cast<const void*>(k16[j] + at) : kf[j] + at;
        };
        const void* rows[4];
        rows_of_head(-1, rows);
        std::vector<float> scores(nh * s_ld, -7.0f), one(nh * s_ld, -7.0f);
        dot(q.data(), q_ld, rows, scores.data(), ld, heads);
        for (int h = 0; h < nh; ++h) {
          const void* head_rows[4];
          rows_of_head(h, head_rows);
          dot(q.data() + h * d, q_ld, head_rows, one.data() + h * s_ld, ld, {});
        }
        for (int h = 0; h < nh; ++h) {
          for (int64_t i = 0; i < nq; ++i) {
            for (int j = 0; j < nk; ++j) {
              double want = 0;
              for (int64_t x = 0; x < d; ++x) want += double{q[i * q_ld + h * d + x]} * cached(j, h, x);
              const float got = scores[h * s_ld + i * ld + j];
              EXPECT_NEAR(got, 0.5 * want, 1e-4 * d) << kk->isa << " f16=" << f16 << " d=" << d << " h=" << h;
              EXPECT_EQ(got, one[h * s_ld + i * ld + j]) << kk->isa << " f16=" << f16 << " d=" << d << " h=" << h;
            }
          }
        }
        std::vector<float> o(nq * o_ld, 1.0f), o_one(nq * o_ld, 1.0f);
        axpy(w.data(), rows, o.data(), heads);
        for (int h = 0; h < nh; ++h) {
          const void* head_rows[4];
          rows_of_head(h, head_rows);
          axpy(w.data() + h * s_ld, head_rows, o_one.data() + h * d, {});
        }
        for (int64_t i = 0; i < nq; ++i) {
          for (int64_t x = 0; x < o_ld; ++x) {
            double want = 1.0;
            if (x < nh * d) {
              const int h = static_cast<int>(x / d);
              for (int j = 0; j < nk; ++j) want += double{w[h * s_ld + i * ld + j]} * cached(j, h, x % d);
            }
            EXPECT_NEAR(o[i * o_ld + x], want, 1e-5) << kk->isa << " f16=" << f16 << " d=" << d << " x=" << x;
            EXPECT_EQ(o[i * o_ld + x], o_one[i * o_ld + x]) << kk->isa << " f16=" << f16 << " d=" << d << " x=" << x;
          }
        }
      }
    }
  }
}

// The q8_0 forms (a q8_0 KV cache) against sums over the dequantized values, on heads of
// one and of several blocks, with grouped KV heads.
TEST(Kernels, Q8HeadKernelsMatchDequantizedSums) {
  for (int64_t d : {32, 128}) {
    for (int group : {1, 4}) {
      const int nh = 8, nkv = nh / group;
      const int64_t stride = 11;
      const auto vals = random_normal(nkv * d, 16), q = random_normal(nh * d, 17), w = random_normal(nh * stride, 18);
      std::vector<BlockQ8_0> row(nkv * d / kQBlock);
      quantize_row_q8_0(vals.data(), row.data(), nkv * d);
      std::vector<float> deq(nkv * d);
      dequantize_row(DType::Q8_0, row.data(), deq.data(), nkv * d);
      for (const DotKernels* kk : {&dot_kernels(), &dot_kernels_scalar()}) {
        SCOPED_TRACE(std::string(kk->isa) + " d " + std::to_string(d) + " group " + std::to_string(group));
        std::vector<float> back(nkv * d);
        kk->q8_to_f32(row.data(), back.data(), nkv * d);
        EXPECT_EQ(back, deq);
        std::vector<float> a(nh * stride);
        kk->dot_heads_q8(q.data(), row.data(), nh, group, d, 0.5f, a.data(), stride);
        std::vector<float> o(nh * d, 1.0f);
        kk->axpy_heads_q8(w.data(), stride, row.data(), nh, group, d, o.data());
        for (int h = 0; h < nh; ++h) {
          double want = 0;
          for (int64_t i = 0; i < d; ++i) want += double{q[h * d + i]} * deq[h / group * d + i];
          EXPECT_NEAR(a[h * stride], 0.5 * want, 1e-4 * d);
          for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(o[h * d + i], 1.0f + w[h * stride] * deq[h / group * d + i], 1e-5);
        }
      }
    }
  }
}

// The vector exp of the dispatched softmax and SwiGLU against libm, over the range a
// softmax or a gate sees, including values that underflow.
TEST(Kernels, VectorExpKernelsMatchLibm) {
  const DotKernels& fast = dot_kernels();
  for (int64_t n : {1, 7, 8, 33, 300}) {
    std::vector<float> x(n), want(n);
    for (int64_t i = 0; i < n; ++i) x[i] = -100.0f + 130.0f * static_cast<float>(i) / static_cast<float>(n);
    if (n == 1) x[0] = 3.0f;
    want = x;
    softmax(want.data(), n);
    std::vector<float> got = x;
    float max = 0.0f;
    const float sum = fast.exp_minus_max(got.data(), n, &max);
    EXPECT_EQ(max, *std::max_element(x.begin(), x.end()));
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i] / sum, want[i], 1e-6 + 4e-7 * want[i]) << fast.isa << " " << n;
    std::vector<float> up = random_normal(n, 9), g1 = x, g2 = x;
    for (float& v : g1) v *= 0.3f;
    g2 = g1;
    swiglu(g1.data(), up.data(), n);
    fast.swiglu(g2.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(g2[i], g1[i], 1e-6 + 4e-7 * std::fabs(g1[i])) << fast.isa << " " << n;
  }
}

// RMSNorm's sum of squares, scalar and dispatched, against a double sum, at lengths with
// and without a vector tail; the scalar one is what rms_norm ran before it was dispatched.
TEST(Kernels, SumOfSquaresMatchesDouble) {
  for (const DotKernels* k : {&dot_kernels_scalar(), &dot_kernels()}) {
    for (int64_t n : {1, 5, 8, 13, 2048, 2051}) {
      const auto x = random_normal(n, 31);
      double want = 0.0;
      for (float v : x) want += static_cast<double>(v * v);
      EXPECT_NEAR(k->sum_squares(x.data(), n), want, 1e-12 * want) << k->isa << " n=" << n;
    }
  }
  std::vector<float> x = random_normal(2048, 32), w = random_normal(2048, 33), y(2048);
  rms_norm(x.data(), w.data(), 2048, 1e-5f, y.data());
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / 2048 + 1e-5);
  for (int i = 0; i < 2048; ++i) EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-6 * (1 + std::fabs(x[i] * scale * w[i]))) << i;
}

// Batches of sequences with cached positions `ctx` whose last `n_rows` positions are the
// query rows, against a double-precision softmax(QK)V over the values as stored (f32, f16
// or q8_0; q8_0 only where the head sizes are whole blocks).
// `max_copy_floats`: the cap on the f32 copies of a q8_0 cache for prompt rows; when it is
// small, the prompt runs must go in groups and each group's copy alone is held.
void check_attention(const std::vector<int64_t>& ctx, const std::vector<int64_t>& n_rows,
                     const AttentionShape s = {6, 2, 16, 8, 0.25f},
                     size_t max_copy_floats = AttentionScratch{}.max_copy_floats) {
  const int64_t kd = s.n_head_kv * s.head_dim_k, vd = s.n_head_kv * s.head_dim_v, od = s.n_head * s.head_dim_v;
  const int64_t qd = s.n_head * s.head_dim_k, block = 4;
  const int n_seq = static_cast<int>(ctx.size());
  const bool q8_fits = s.head_dim_k % kQBlock == 0 && s.head_dim_v % kQBlock == 0;
  for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::Q8_0}) {
    if (elem == KvElem::Q8_0 && !q8_fits) continue;
    SCOPED_TRACE(elem == KvElem::F32 ? "f32 cache" : elem == KvElem::F16 ? "f16 cache" : "q8_0 cache");
    std::vector<std::vector<float>> kstore, vstore;  // the values as the kernel sees them
    std::vector<std::vector<uint16_t>> kh(n_seq), vh(n_seq);
    std::vector<std::vector<BlockQ8_0>> kq(n_seq), vq(n_seq);
    std::vector<std::vector<const void*>> kb(n_seq), vb(n_seq);
    std::vector<AttentionRun> runs;
    std::vector<int32_t> pos;
    int64_t t0 = 0;
    for (int i = 0; i < n_seq; ++i) {
      kstore.push_back(random_normal(ctx[i] * kd + block * kd, 10 + i));
      vstore.push_back(random_normal(ctx[i] * vd + block * vd, 20 + i));
      for (auto* st : {&kstore[i], &vstore[i]}) {
        const bool is_k = st == &kstore[i];
        auto& h = is_k ? kh[i] : vh[i];
        for (float& x : *st) {
          h.push_back(f32_to_f16(x));
          if (elem == KvElem::F16) x = f16_to_f32(h.back());
        }
        if (elem == KvElem::Q8_0) {  // quantized row by row, then read back
          auto& q = is_k ? kq[i] : vq[i];
          const int64_t dim = is_k ? kd : vd;
          q.resize(st->size() / kQBlock);
          for (size_t r = 0; r * dim < st->size(); ++r) {
            quantize_row_q8_0(st->data() + r * dim, q.data() + r * dim / kQBlock, dim);
            dequantize_row(DType::Q8_0, q.data() + r * dim / kQBlock, st->data() + r * dim, dim);
          }
        }
      }
      for (int64_t b = 0; b * block < ctx[i]; ++b) {
        auto at = [&](std::vector<float>& f, std::vector<uint16_t>& h, std::vector<BlockQ8_0>& q, int64_t dim) -> const void* {
          if (elem == KvElem::F16) return h.data() + b * block * dim;
          if (elem == KvElem::Q8_0) return q.data() + b * block * dim / kQBlock;
          return f.data() + b * block * dim;
        };
        kb[i].push_back(at(kstore[i], kh[i], kq[i], kd));
        vb[i].push_back(at(vstore[i], vh[i], vq[i], vd));
      }
      runs.push_back({t0, n_rows[i], KvView{kb[i].data(), vb[i].data(), block, kd, vd, elem}});
      for (int64_t r = 0; r < n_rows[i]; ++r) pos.push_back(static_cast<int32_t>(ctx[i] - n_rows[i] + r));
      t0 += n_rows[i];
    }
    const auto q = random_normal(t0 * qd, 30);
    std::vector<float> out(t0 * od, -7.0f);
    ThreadPool pool(2);
    AttentionScratch scratch;
    scratch.max_copy_floats = max_copy_floats;
    attention(q.data(), qd, pos.data(), runs, s, out.data(), od, pool, scratch);
    if (elem == KvElem::Q8_0) {
      // The copies held: all prompt runs' at once, or under a small cap the largest one's.
      size_t sum = 0, largest = 0;
      for (int i = 0; i < n_seq; ++i) {
        if (n_rows[i] < 2) continue;
        const size_t n = static_cast<size_t>(ctx[i] * (kd + vd));
        sum += n;
        largest = std::max(largest, n);
      }
      EXPECT_EQ(scratch.f32_copies().values.size(), sum <= max_copy_floats ? sum : largest);
    }
    for (int i = 0, t = 0; i < n_seq; ++i) {
      for (int64_t r = 0; r < n_rows[i]; ++r, ++t) {
        for (int h = 0; h < s.n_head; ++h) {
          const int g = h / (s.n_head / s.n_head_kv);
          std::vector<double> w(pos[t] + 1);
          double max = -1e300, sum = 0;
          for (int64_t p = 0; p <= pos[t]; ++p) {
            double d = 0;
            for (int j = 0; j < s.head_dim_k; ++j) d += q[t * qd + h * s.head_dim_k + j] * kstore[i][p * kd + g * s.head_dim_k + j];
            w[p] = d * s.scale;
            max = std::max(max, w[p]);
          }
          for (auto& x : w) sum += (x = std::exp(x - max));
          for (int j = 0; j < s.head_dim_v; ++j) {
            double o = 0;
            for (int64_t p = 0; p <= pos[t]; ++p) o += w[p] / sum * vstore[i][p * vd + g * s.head_dim_v + j];
            EXPECT_NEAR(out[t * od + h * s.head_dim_v + j], o, 1e-5) << "seq " << i << " row " << r << " head " << h;
          }
        }
      }
    }
  }
}

TEST(Kernels, AttentionMatchesNaive) {
  check_attention({11, 3, 30}, {3, 1, 12});
}

// Long contexts: a decode row's cached positions split into chunks of 64 and merged; prompt
// rows (two or more of a sequence) beside them, unsplit.
TEST(Kernels, AttentionSplitOverPositionsMatchesNaive) {
  check_attention({300}, {1});
  check_attention({257, 100}, {2, 1});
  check_attention({200}, {9});
}

// Heads of whole 32-value blocks, so the q8_0 cache is checked too: decode rows (the q8
// dot and axpy kernels) and prompt rows (dequantized into the f32 tiles).
TEST(Kernels, AttentionOverQ8CacheMatchesNaive) {
  const AttentionShape s{4, 2, 32, 64, 0.15f};
  check_attention({11, 3, 30}, {3, 1, 12}, s);
  check_attention({150, 40}, {1, 1}, s);
  // Prompt runs past the cap on f32 copies go in groups (here one run each), decode runs
  // beside them.
  check_attention({11, 3, 30, 20}, {3, 1, 12, 5}, s, 1);
}

// A decode row's outputs are the same bits whatever else is in the batch and however many
// threads run it (a seeded request samples the same text on a busy server): its cached
// positions split at fixed places and merge in a fixed order.
TEST(Kernels, AttentionOfADecodeRowDoesNotDependOnTheBatch) {
  const AttentionShape s{8, 4, 32, 32, 0.18f};
  const int64_t kd = s.n_head_kv * s.head_dim_k, qd = s.n_head * s.head_dim_k, od = s.n_head * s.head_dim_v;
  const int64_t block = 16;
  for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::Q8_0}) {
    SCOPED_TRACE(static_cast<int>(elem));
    // Sequences of 9 to 300 cached positions, each stored as `elem` in blocks of 16 rows.
    const std::vector<int64_t> ctx = {300, 9, 130, 64, 65, 200};
    std::vector<std::vector<float>> kf, vf;
    std::vector<std::vector<uint16_t>> kh, vh;
    std::vector<std::vector<BlockQ8_0>> kq, vq;
    std::vector<std::vector<const void*>> kb(ctx.size()), vb(ctx.size());
    std::vector<KvView> views;
    for (size_t i = 0; i < ctx.size(); ++i) {
      const int64_t rows = (ctx[i] + block - 1) / block * block;
      kf.push_back(random_normal(rows * kd, 40 + i));
      vf.push_back(random_normal(rows * kd, 50 + i));
      kh.emplace_back(), vh.emplace_back(), kq.emplace_back(rows * kd / kQBlock),
          vq.emplace_back(rows * kd / kQBlock);
      for (float x : kf[i]) kh[i].push_back(f32_to_f16(x));
      for (float x : vf[i]) vh[i].push_back(f32_to_f16(x));
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row_q8_0(kf[i].data() + r * kd, kq[i].data() + r * kd / kQBlock, kd);
        quantize_row_q8_0(vf[i].data() + r * kd, vq[i].data() + r * kd / kQBlock, kd);
      }
      for (int64_t b = 0; b < rows / block; ++b) {
        const int64_t at = b * block * kd;
        kb[i].push_back(elem == KvElem::F16    ? static_cast<const void*>(kh[i].data() + at)
                        : elem == KvElem::Q8_0 ? static_cast<const void*>(kq[i].data() + at / kQBlock)
                                               : kf[i].data() + at);
        vb[i].push_back(elem == KvElem::F16    ? static_cast<const void*>(vh[i].data() + at)
                        : elem == KvElem::Q8_0 ? static_cast<const void*>(vq[i].data() + at / kQBlock)
                                               : vf[i].data() + at);
      }
      views.push_back(KvView{kb[i].data(), vb[i].data(), block, kd, kd, elem});
    }
    const auto q = random_normal(16 * qd, 60);
    // Decode rows of every sequence, alone on 1 to 3 threads, then together with each other
    // and with a prompt of 5 rows (sequence 4's last positions) on 1 to 3 threads.
    auto run = [&](const std::vector<size_t>& seqs, int threads, bool with_prompt) {
      std::vector<AttentionRun> runs;
      std::vector<int32_t> pos;
      int64_t t = 0;
      for (size_t i : seqs) {
        runs.push_back({t++, 1, views[i]});
        pos.push_back(static_cast<int32_t>(ctx[i] - 1));
      }
      if (with_prompt) {
        runs.push_back({t, 5, views[4]});
        for (int r = 0; r < 5; ++r, ++t) pos.push_back(static_cast<int32_t>(ctx[4] - 5 + r));
      }
      std::vector<float> out(t * od, 0.0f);
      ThreadPool pool(threads);
      AttentionScratch scratch;
      attention(q.data(), qd, pos.data(), runs, s, out.data(), od, pool, scratch);
      return out;
    };
    for (size_t i = 0; i < ctx.size(); ++i) {
      const std::vector<float> alone = run({i}, 1, false);
      for (int threads : {1, 2, 3}) {
        EXPECT_EQ(run({i}, threads, false), alone) << "sequence " << i << ", " << threads << " threads";
        std::vector<size_t> all = {i};
        for (size_t j = 0; j < ctx.size(); ++j)
          if (j != i) all.push_back(j);
        const std::vector<float> batch = run(all, threads, true);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin()))
            << "sequence " << i << " in a batch of " << all.size() << " and a prompt, " << threads
            << " threads";
      }
    }
  }
}

TEST(Kernels, MatmulMatchesNaiveProduct) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const int64_t rows = 37, cols = 96, n = 5;
  const auto w = random_normal(rows * cols, 6), x = random_normal(n * cols, 7);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const auto wq = encode(t, w, rows, cols);
    WeightMatrix m{t, rows, cols, wq.data(), "w"};
    std::vector<float> y(n * rows);
    matmul(m, {x.data(), n, cols}, {y.data(), rows}, pool, scratch);
    // Quantized weights see Q8_0 activations, F16 and BF16 weights activations of their
    // own type: the reference uses the same rounded inputs.
    std::vector<float> xr = x;
    if (t == DType::F16) {
      for (float& v : xr) v = f16_to_f32(f32_to_f16(v));
    }
    if (t == DType::BF16) {
      for (float& v : xr) v = bf16_to_f32(f32_to_bf16(v));
    }
    if (takes_q8_activations(t)) {
      std::vector<BlockQ8_0> q(cols / kQBlock);
      for (int64_t i = 0; i < n; ++i) {
        quantize_row_q8_0(x.data() + i * cols, q.data(), cols);
        dequantize_row(DType::Q8_0, q.data(), xr.data() + i * cols, cols);
      }
    }
    std::vector<float> wr(cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, m.row(r), wr.data(), cols);
      for (int64_t i = 0; i < n; ++i) {
        double ref = 0;
        for (int64_t c = 0; c < cols; ++c) ref += double(wr[c]) * xr[i * cols + c];
        EXPECT_NEAR(y[i * rows + r], ref, 1e-3) << dtype_name(t) << " r=" << r << " t=" << i;
      }
    }
  }
}

// Streaming tiles: equal parts of 16-row multiples, none longer than asked for by more
// than the rounding, no short remainder; as long as two per thread allow, 128 KiB-2 MiB.
TEST(Kernels, StreamTilesCutMatricesEvenly) {
  const WeightMatrix m{DType::Q4_0, 1000, 2048, nullptr, "w"};
  for (int64_t bytes : {int64_t{1} << 17, int64_t{1} << 19, int64_t{1} << 21}) {
    const int64_t per = even_row_tile(m, bytes);
    const int64_t tiles = (m.rows + per - 1) / per;
    EXPECT_EQ(per % 16, 0) << bytes;
    EXPECT_LE(static_cast<int64_t>(m.row_bytes()) * (per - 16), bytes) << bytes;
    EXPECT_GE(m.rows - (tiles - 1) * per, per - 16 * tiles) << bytes;  // the last tile is not short
  }
  EXPECT_EQ(even_row_tile(m, int64_t{4} << 20), 1008);  // one tile for the whole matrix
  EXPECT_EQ(stream_tile_bytes(int64_t{9} << 20, 2), int64_t{2} << 20);
  EXPECT_EQ(stream_tile_bytes(int64_t{1} << 20, 2), int64_t{256} << 10);
  EXPECT_EQ(stream_tile_bytes(int64_t{100} << 10, 2), int64_t{128} << 10);
}

// One to four tokens take the streaming tiles: every row has the bits the same rows get
// computed one at a time.
TEST(Kernels, StreamTiledMatmulMatchesRowByRow) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const int64_t rows = 3000, cols = 256;
  const auto w = random_normal(rows * cols, 8), x = random_normal(4 * cols, 9);
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    const auto wq = encode(t, w, rows, cols);
    const WeightMatrix m{t, rows, cols, wq.data(), "w"};
    for (int64_t n = 1; n <= 4; ++n) {
      std::vector<float> y(n * rows), ref(n * rows);
      matmul(m, {x.data(), n, cols}, {y.data(), rows}, pool, scratch);
      PreparedInput in;
      in.prepare(m, {x.data(), n, cols});
      for (int64_t r = 0; r < rows; ++r) matmul_rows(m, in, {ref.data(), rows}, r, r + 1);
      EXPECT_EQ(y, ref) << dtype_name(t) << " n=" << n;
    }
  }
}

// Float weights over many tokens: rows wide enough that the token rows go in several
// L2-sized chunks, each with a short tile first; every token's outputs have the bits it
// gets when it is multiplied alone, and match a sum in double.
TEST(Kernels, FloatMatmulGivesEveryTokenItsOwnBits) {
  ThreadPool pool(2);
  MatmulScratch scratch, alone;
  const int64_t rows = 9, cols = 8192 + 16, n = 21;  // 32 KiB per f32 token row: chunks of 8
  const auto w = random_normal(rows * cols, 8), x = random_normal(n * cols, 9);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const auto wq = encode(t, w, rows, cols);
    WeightMatrix m{t, rows, cols, wq.data(), "w"};
    std::vector<float> y(n * rows), y1(rows), wr(cols);
    matmul(m, {x.data(), n, cols}, {y.data(), rows}, pool, scratch);
    for (int64_t i = 0; i < n; ++i) {
      matmul(m, {x.data() + i * cols, 1, cols}, {y1.data(), rows}, pool, alone);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(y[i * rows + r], y1[r]) << dtype_name(t) << " r=" << r << " t=" << i;
        dequantize_row(t, m.row(r), wr.data(), cols);
        double ref = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const float xv = x[i * cols + c];
          ref += double(wr[c]) * (t == DType::BF16  ? bf16_to_f32(f32_to_bf16(xv))
                                  : t == DType::F16 ? f16_to_f32(f32_to_f16(xv))
                                                    : xv);
        }
        EXPECT_NEAR(y1[r], ref, 2e-6 * cols) << dtype_name(t) << " r=" << r << " t=" << i;
      }
    }
  }
}

TEST(Kernels, RmsNormSoftmaxSwiglu) {
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 2, 2}, y(4);
  rms_norm(x.data(), w.data(), 4, 0.0f, y.data());
  const double s = 1.0 / std::sqrt(30.0 / 4);
  EXPECT_NEAR(y[3], 4 * s * 2, 1e-6);
  std::vector<float> p = {0, 0, std::log(2.0f)};
  softmax(p.data(), 3);
  EXPECT_NEAR(p[2], 0.5, 1e-6);
  std::vector<float> g = {1.0f, -2.0f}, u = {2.0f, 3.0f};
  swiglu(g.data(), u.data(), 2);
  EXPECT_NEAR(g[0], 1.0 / (1 + std::exp(-1.0)) * 2, 1e-6);
  EXPECT_NEAR(g[1], -2.0 / (1 + std::exp(2.0)) * 3, 1e-6);
}

TEST(Kernels, RopeRotatesPairs) {
  RopeParams p{RopeType::Norm, 4, 10000.0f, 1.0f};
  std::vector<float> v = {1, 0, 1, 0};
  rope(v.data(), 1, 4, 1, p);
  EXPECT_NEAR(v[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(v[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(v[2], std::cos(0.01), 1e-6);  // theta = 10000^(-2/4)
  p.type = RopeType::Neox;
  std::vector<float> n = {1, 1, 0, 0};
  rope(n.data(), 1, 4, 1, p);
  EXPECT_NEAR(n[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(n[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(n[3], std::sin(0.01), 1e-6);
}

// The bandwidth probe over several buffers reads exactly the whole 128-byte steps inside
// each one (from its first 64-byte boundary), and its checksum is theirs.
TEST(Kernels, StreamReadOverSpansReadsEachWholeStep) {
  std::vector<uint64_t> words((size_t{3} << 20) / 8);
  for (size_t i = 0; i < words.size(); ++i) words[i] = i * 0x9E3779B97F4A7C15ull;
  const auto* base = reinterpret_cast<const uint8_t*>(words.data());
  const uint8_t* start = base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  // Spans over chunk boundaries (1 MiB), with ragged starts and ends, and one too short.
  const std::vector<ByteSpan> spans = {{start + 8, (size_t{1} << 20) + 500}, {start + (size_t{3} << 19), 70000},
                                       {start + (size_t{5} << 19), 100}};
  uint64_t want = 0;
  size_t want_bytes = 0;
  for (const ByteSpan& s : spans) {
    const auto a = reinterpret_cast<uintptr_t>(s.data);
    const uintptr_t b = (a + 63) / 64 * 64, e = (a + s.bytes) / 128 * 128;
    const size_t n = e > b ? (e - b) / 128 * 128 : 0;
    for (size_t off = 0; off < n; off += 8) want ^= *reinterpret_cast<const uint64_t*>(b + off);
    want_bytes += n;
  }
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    size_t read = 0;
    EXPECT_EQ(stream_read(spans, pool, &read), want);
    EXPECT_EQ(read, want_bytes);
  }
}

TEST(Kernels, ThreadPoolRunsEveryTaskOnce) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(1000, [&](int64_t i, int thread) {
      EXPECT_LT(thread, 3);
      hits[i]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace sy::cpu

namespace sy::cpu {
namespace {

// Random rows x cols matrices in the packed layout, one per seed.
std::vector<std::vector<uint8_t>> packed_matrices(DType t, int64_t rows, int64_t cols,
                                                  std::initializer_list<uint32_t> seeds) {
  const size_t rb = dtype_row_bytes(t, cols);
  std::vector<std::vector<uint8_t>> packed;
  for (uint32_t seed : seeds) {
    const auto gguf = encode(t, random_normal(rows * cols, seed), rows, cols);
    packed.emplace_back(gguf.size());
    for (int64_t r = 0; r < rows; ++r) pack_row(t, gguf.data() + r * rb, packed.back().data() + r * rb, cols);
  }
  return packed;
}

// Packed Q4_0 / Q8_0 kernels (scalar reference and the dispatched one) against the
// GGUF-layout scalar dot products, on rows with whole groups and a tail, for every
// token count up to 19 (all register-tile sizes and remainders).
TEST(KernelsPacked, MatchGgufLayoutDots) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    for (int64_t cols : {256, 512 + 64, 1408}) {
      const int64_t rows = 21;
      const auto w = random_normal(rows * cols, 11);
      const auto gguf = encode(t, w, rows, cols);
      std::vector<uint8_t> packed(gguf.size());
      const size_t rb = dtype_row_bytes(t, cols);
      for (int64_t r = 0; r < rows; ++r) pack_row(t, gguf.data() + r * rb, packed.data() + r * rb, cols);
      // Packing round-trips to the same values.
      std::vector<float> a(cols), b(cols);
      dequantize_row(t, gguf.data() + 3 * rb, a.data(), cols);
      dequantize_packed_row(t, packed.data() + 3 * rb, b.data(), cols);
      ASSERT_EQ(a, b);
      for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 12, 16, 19}) {
        const auto x = random_normal(n * cols, 12 + n);
        PackedActivations acts;
        acts.quantize(x.data(), n, cols, cols);
        std::vector<BlockQ8_0> xq(cols / kQBlock);
        for (const PackedKernels* k : packed_kernels_all()) {
          std::vector<float> y(n * rows, -1.0f);
          (t == DType::Q4_0 ? k->q4_0 : k->q8_0)(packed.data(), rb, cols, 0, rows, acts, y.data(), rows);
          for (int64_t i = 0; i < n; ++i) {
            quantize_row_q8_0(x.data() + i * cols, xq.data(), cols);
            for (int64_t r = 0; r < rows; ++r) {
              const void* row = gguf.data() + r * rb;
              const float ref = t == DType::Q4_0
                  ? dot_kernels_scalar().q4_0(static_cast<const BlockQ4_0*>(row), xq.data(), cols)
                  : dot_kernels_scalar().q8_0(static_cast<const BlockQ8_0*>(row), xq.data(), cols);
              EXPECT_NEAR(y[i * rows + r], ref, 1e-4 * (1 + std::fabs(ref)))
                  << k->isa << " " << dtype_name(t) << " cols=" << cols << " n=" << n << " r=" << r << " t=" << i;
            }
          }
        }
      }
    }
  }
}

// Many tokens (a prefill): the token rows go in chunks, the wide Q4_0 tiles and the
// narrow ones must give the scalar kernel's results for every row, chunk edges included.
TEST(KernelsPacked, ManyTokensMatchScalar) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 7, cols = 4096 + 256 + 32;  // chunks of 60 tokens, an odd group and a tail
    const size_t rb = dtype_row_bytes(t, cols);
    const auto gguf = encode(t, random_normal(rows * cols, 61), rows, cols);
    std::vector<uint8_t> packed(gguf.size());
    for (int64_t r = 0; r < rows; ++r) pack_row(t, gguf.data() + r * rb, packed.data() + r * rb, cols);
    const int64_t n = 131;
    const auto x = random_normal(n * cols, 62);
    PackedActivations acts;
    acts.quantize(x.data(), n, cols, cols);
    std::vector<float> want(n * rows);
    const PackedKernels& ref = packed_kernels_scalar();
    (t == DType::Q4_0 ? ref.q4_0 : ref.q8_0)(packed.data(), rb, cols, 0, rows, acts, want.data(), rows);
    for (const PackedKernels* k : packed_kernels_all()) {
      const PackedKernels& fast = *k;
      std::vector<float> got(n * rows, -1.0f);
      (t == DType::Q4_0 ? fast.q4_0 : fast.q8_0)(packed.data(), rb, cols, 0, rows, acts, got.data(), rows);
      for (int64_t i = 0; i < n * rows; ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << fast.isa << " " << dtype_name(t) << " token " << i / rows;
      }
      // A token's results do not depend on the batch around it (the server relies on it):
      // token 77 alone, through the one-token path, gives the same bits.
      PackedActivations one;
      one.quantize(x.data() + 77 * cols, 1, cols, cols);
      std::vector<float> alone(rows);
      (t == DType::Q4_0 ? fast.q4_0 : fast.q8_0)(packed.data(), rb, cols, 0, rows, one, alone.data(), rows);
      for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(alone[r], got[77 * rows + r]) << fast.isa << " " << dtype_name(t) << " row " << r;
    }
  }
}

// The tile kernels (AMX) give the AVX-512 VNNI kernels' results bit for bit, which a token
// alone gets through the one-token path: row ranges that start and end off the 16-row
// tiles, token counts around the 16-token chunks, one matrix and two.
TEST(KernelsPacked, TileKernelsGiveTheVectorKernelsBits) {
  const PackedKernels* amx = packed_kernels_amx();
  const PackedKernels* vnni = packed_kernels_avx512vnni();
  if (!amx || !vnni) GTEST_SKIP() << "no AMX tiles on this CPU";
  if (&packed_kernels() != amx) GTEST_SKIP() << "SY_ISA keeps the kernels below AMX (no tile layout)";
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    for (int64_t cols : {512, 2048}) {
      const int64_t rows = 53;
      const size_t rb = dtype_row_bytes(t, cols);
      const auto seed = static_cast<uint32_t>(71 + cols);
      const auto packed = packed_matrices(t, rows, cols, {seed, seed + 1});
      const int64_t from = amx->tile_tokens;
      for (int64_t n : {from - 1, from, from + 1, 2 * from - 1, int64_t{40}}) {
        const auto x = random_normal(n * cols, 80 + n);
        PackedActivations acts;
        acts.quantize(x.data(), n, cols, cols);
        ASSERT_EQ(acts.has_tiles(), n >= from) << "n=" << n;
        const auto one = [&](const PackedKernels* k) { return t == DType::Q4_0 ? k->q4_0 : k->q8_0; };
        const auto two = [&](const PackedKernels* k) { return t == DType::Q4_0 ? k->q4_0_two : k->q8_0_two; };
        std::vector<float> want(n * rows, -1.0f), got(n * rows, -1.0f), got_b(n * rows, -1.0f), want_b(n * rows, -1.0f);
        one(vnni)(packed[0].data(), rb, cols, 3, rows, acts, want.data(), rows);
        one(amx)(packed[0].data(), rb, cols, 3, rows, acts, got.data(), rows);
        EXPECT_EQ(got, want) << dtype_name(t) << " cols=" << cols << " n=" << n;
        one(vnni)(packed[1].data(), rb, cols, 3, rows, acts, want_b.data(), rows);
        std::fill(got.begin(), got.end(), -1.0f);
        two(amx)(packed[0].data(), packed[1].data(), rb, cols, 3, rows, acts, got.data(), got_b.data(), rows);
        EXPECT_EQ(got, want) << "two, a: " << dtype_name(t) << " cols=" << cols << " n=" << n;
        EXPECT_EQ(got_b, want_b) << "two, b: " << dtype_name(t) << " cols=" << cols << " n=" << n;
        // The last token alone, through the one-token path.
        PackedActivations lone;
        lone.quantize(x.data() + (n - 1) * cols, 1, cols, cols);
        ASSERT_FALSE(lone.has_tiles());
        std::vector<float> alone(rows, -1.0f);
        one(amx)(packed[0].data(), rb, cols, 0, rows, lone, alone.data(), rows);
        for (int64_t r = 3; r < rows; ++r) EXPECT_EQ(alone[r], want[(n - 1) * rows + r]) << dtype_name(t) << " row " << r;
      }
    }
  }
}

// The two-matrix form (an expert's gate and up on one input) gives each matrix's own
// single-matrix results, for every token count up to 10 and rows not a multiple of 2.
TEST(KernelsPacked, TwoMatricesMatchOneAtATime) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 37, cols = 512 + 256 + 32;  // an odd group and a tail block
    const size_t rb = dtype_row_bytes(t, cols);
    const auto packed = packed_matrices(t, rows, cols, {41, 42});
    for (int64_t n = 1; n <= 10; ++n) {
      const auto x = random_normal(n * cols, 50 + n);
      PackedActivations acts;
      acts.quantize(x.data(), n, cols, cols);
      for (const PackedKernels* k : packed_kernels_all()) {
        const auto one = t == DType::Q4_0 ? k->q4_0 : k->q8_0;
        const auto two = t == DType::Q4_0 ? k->q4_0_two : k->q8_0_two;
        std::vector<float> a(n * rows), b(n * rows), ya(n * rows, -1.0f), yb(n * rows, -1.0f);
        one(packed[0].data(), rb, cols, 0, rows, acts, a.data(), rows);
        one(packed[1].data(), rb, cols, 0, rows, acts, b.data(), rows);
        two(packed[0].data(), packed[1].data(), rb, cols, 3, rows, acts, ya.data(), yb.data(), rows);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want_a = r < 3 ? -1.0f : a[i * rows + r], want_b = r < 3 ? -1.0f : b[i * rows + r];
            EXPECT_NEAR(ya[i * rows + r], want_a, 1e-5 * (1 + std::fabs(want_a))) << k->isa << " n=" << n << " r=" << r;
            EXPECT_NEAR(yb[i * rows + r], want_b, 1e-5 * (1 + std::fabs(want_b))) << k->isa << " n=" << n << " r=" << r;
          }
        }
      }
    }
  }
}

// Interleaved streams (two experts' rows taken in turn) give each stream the bits the
// one- and two-matrix kernels give it alone: every pair of token counts up to
// kStreamingTokens, a stream of two matrices beside one of one, rows from 3.
TEST(KernelsPacked, InterleavedStreamsGiveEachStreamItsOwnBits) {
  if (const PackedKernels* v = packed_kernels_avx512vnni()) {
    ASSERT_NE(v->interleaved, nullptr);
  }
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 37, cols = 512 + 256 + 32;  // an odd group and a tail block
    const size_t rb = dtype_row_bytes(t, cols);
    const auto packed = packed_matrices(t, rows, cols, {61, 62, 63});
    for (int64_t na = 1; na <= kStreamingTokens; ++na) {
      for (int64_t nb = 1; nb <= kStreamingTokens; ++nb) {
        const auto xa = random_normal(na * cols, 70 + na), xb = random_normal(nb * cols, 80 + nb);
        PackedActivations acts_a, acts_b;
        acts_a.quantize(xa.data(), na, cols, cols);
        acts_b.quantize(xb.data(), nb, cols, cols);
        for (const PackedKernels* k : packed_kernels_all()) {
          if (k->interleaved == nullptr) continue;
          const auto one = t == DType::Q4_0 ? k->q4_0 : k->q8_0;
          const auto two = t == DType::Q4_0 ? k->q4_0_two : k->q8_0_two;
          // Results `rows` apart per token, so both streams share one ldy.
          std::vector<float> ga(na * rows, -1.0f), ua(na * rows, -1.0f), db(nb * rows, -1.0f);
          std::vector<float> want_g(na * rows, -1.0f), want_u(na * rows, -1.0f), want_d(nb * rows, -1.0f);
          two(packed[0].data(), packed[1].data(), rb, cols, 3, rows, acts_a, want_g.data(), want_u.data(), rows);
          one(packed[2].data(), rb, cols, 3, rows, acts_b, want_d.data(), rows);
          const PackedStream streams[2] = {{packed[0].data(), packed[1].data(), &acts_a, ga.data(), ua.data()},
                                           {packed[2].data(), nullptr, &acts_b, db.data(), nullptr}};
          k->interleaved(streams, 2, t, rb, cols, 3, rows, rows);
          EXPECT_EQ(ga, want_g) << k->isa << " " << dtype_name(t) << " na=" << na << " nb=" << nb;
          EXPECT_EQ(ua, want_u) << k->isa << " " << dtype_name(t) << " na=" << na << " nb=" << nb;
          EXPECT_EQ(db, want_d) << k->isa << " " << dtype_name(t) << " na=" << na << " nb=" << nb;
        }
      }
    }
  }
}

// How a kernel prefetches the rows (RowPrefetch: the grouped expert FFN leaves out the far
// prefetches) changes no result: rows long enough for the far prefetches to run ahead of
// the tile (16 KiB: 14 rows of 2048 Q4_0 values), every narrow tile size, one matrix and two.
TEST(KernelsPacked, RowPrefetchChangesNoBits) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 150, cols = 2048;
    const size_t rb = dtype_row_bytes(t, cols);
    const auto packed = packed_matrices(t, rows, cols, {91, 92});
    for (int64_t n = 1; n <= 9; ++n) {
      const auto x = random_normal(n * cols, 95 + n);
      PackedActivations far, near;
      far.quantize(x.data(), n, cols, cols);
      near.quantize(x.data(), n, cols, cols);
      near.set_row_prefetch(RowPrefetch::kNearOnly);
      ASSERT_EQ(far.row_prefetch(), RowPrefetch::kNearAndFar);  // the default
      for (const PackedKernels* k : packed_kernels_all()) {
        const auto one = t == DType::Q4_0 ? k->q4_0 : k->q8_0;
        const auto two = t == DType::Q4_0 ? k->q4_0_two : k->q8_0_two;
        std::vector<float> a(n * rows, -1.0f), a_near(n * rows, -1.0f), b(n * rows), ya(n * rows, -3.0f),
            yb(n * rows, -4.0f);
        one(packed[0].data(), rb, cols, 5, rows, far, a.data(), rows);
        one(packed[0].data(), rb, cols, 5, rows, near, a_near.data(), rows);
        EXPECT_EQ(a, a_near) << k->isa << " " << dtype_name(t) << " n=" << n;
        two(packed[0].data(), packed[1].data(), rb, cols, 5, rows, near, ya.data(), yb.data(), rows);
        one(packed[1].data(), rb, cols, 5, rows, far, b.data(), rows);
        for (int64_t i = 0; i < n * rows; ++i) {
          ASSERT_EQ(ya[i], i % rows < 5 ? -3.0f : a[i]) << k->isa << " two, a: n=" << n << " at " << i;
          ASSERT_EQ(yb[i], i % rows < 5 ? -4.0f : b[i]) << k->isa << " two, b: n=" << n << " at " << i;
        }
      }
    }
  }
}

// The dispatched activation quantizer gives exactly the scalar one's quants, scales and
// sums, including an all-zero block, ties at .5 and values at the block maximum.
TEST(KernelsPacked, QuantizeGroupMatchesScalar) {
  auto x = random_normal(kGroupValues, 31);
  for (int j = 0; j < kQBlock; ++j) x[2 * kQBlock + j] = 0.0f;                 // block 2: zeros
  for (int j = 0; j < kQBlock; ++j) x[5 * kQBlock + j] = 0.5f * (j % 9) - 2.0f;  // block 5: exact halves
  x[5 * kQBlock] = 127.0f / 8;                                                  // scale 1/8: ties after scaling
  const PackedKernels& ref = packed_kernels_scalar();
  std::vector<int8_t> q1(512);
  std::vector<float> d1(8);
  std::vector<int32_t> s1(8);
  ref.quantize_group(x.data(), q1.data(), d1.data(), s1.data());
  EXPECT_EQ(d1[2], 0.0f);
  for (const PackedKernels* k : packed_kernels_all()) {
    std::vector<int8_t> q2(512);
    std::vector<float> d2(8);
    std::vector<int32_t> s2(8);
    k->quantize_group(x.data(), q2.data(), d2.data(), s2.data());
    for (int m = 0; m < 8; ++m)
      for (int i = 0; i < 32; ++i) EXPECT_EQ(q1[64 * m + i], q2[64 * m + i]) << k->isa << " m=" << m << " i=" << i;
    EXPECT_EQ(d1, d2) << k->isa;
    EXPECT_EQ(s1, s2) << k->isa;
  }
}

// The dispatched packing gives the scalar one's bytes, in place (as the expert store packs
// what it reads) and into another buffer, on rows of even and odd group counts and a tail.
TEST(KernelsPacked, PackingMatchesScalar) {
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    for (int64_t cols : {512, 2048, 3 * 256 + 64, 5 * 256}) {
      const int64_t rows = 5;
      const size_t rb = dtype_row_bytes(t, cols);
      const auto gguf = encode(t, random_normal(rows * cols, 41 + cols), rows, cols);
      const int64_t pairs = packed_groups(cols) / 2;
      std::vector<uint8_t> want(gguf), got(gguf), moved(gguf.size(), 0xAB);
      for (int64_t r = 0; r < rows; ++r) packed_kernels_scalar().pack_pairs(t, gguf.data() + r * rb, want.data() + r * rb, pairs);
      for (const PackedKernels* k : packed_kernels_all()) {
        got = gguf;
        for (int64_t r = 0; r < rows; ++r) k->pack_pairs(t, got.data() + r * rb, got.data() + r * rb, pairs);
        EXPECT_EQ(got, want) << k->isa << " " << dtype_name(t) << " cols=" << cols;
      }
      // The whole row, odd group and tail included, packs the same in place and moved.
      got = gguf;
      for (int64_t r = 0; r < rows; ++r) {
        pack_row(t, got.data() + r * rb, got.data() + r * rb, cols);
        pack_row(t, gguf.data() + r * rb, moved.data() + r * rb, cols);
      }
      EXPECT_EQ(got, moved) << dtype_name(t) << " cols=" << cols;
      std::vector<float> a(cols), b(cols);
      dequantize_row(t, gguf.data() + 4 * rb, a.data(), cols);
      dequantize_packed_row(t, got.data() + 4 * rb, b.data(), cols);
      EXPECT_EQ(a, b) << dtype_name(t) << " cols=" << cols;
    }
  }
}

TEST(KernelsPacked, MatmulUsesPackedWeights) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  WeightArena arena;
  const int64_t rows = 40, cols = 512, n = 6;
  const auto w = random_normal(rows * cols, 21), x = random_normal(n * cols, 22);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const auto wq = encode(t, w, rows, cols);
    WeightMatrix plain{t, rows, cols, wq.data(), "w"};
    const WeightMatrix prepared = prepare_weight(plain, arena, pool);
    EXPECT_EQ(prepared.packed, packing_enabled());
    std::vector<float> y0(n * rows), y1(n * rows);
    matmul(plain, {x.data(), n, cols}, {y0.data(), rows}, pool, scratch);
    matmul(prepared, {x.data(), n, cols}, {y1.data(), rows}, pool, scratch);
    for (size_t i = 0; i < y0.size(); ++i) EXPECT_NEAR(y0[i], y1[i], 1e-4 * (1 + std::fabs(y0[i])));
    std::vector<float> r0(cols), r1(cols);
    weight_row_to_f32(plain, 7, r0.data());
    weight_row_to_f32(prepared, 7, r1.data());
    EXPECT_EQ(r0, r1);
  }
}

}  // namespace
}  // namespace sy::cpu
