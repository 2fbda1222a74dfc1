// GroupedFfn runs all FFNs of a layer as one job whose tasks wait for their own FFN's
// earlier stage: whatever the thread count, every token row gets the bits it gets when its
// FFN runs alone on one thread, and the single-thread result is a SwiGLU FFN.
#include "experts/grouped_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"

namespace sy {
namespace {

constexpr int64_t kDim = 256, kFf = 512;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One FFN's three matrices in dtype t (packed when the kernels pack that type), and
// their values as floats.
struct TestFfn {
  std::vector<float> f32[3];
  std::vector<uint8_t> bytes[3];
  FfnWeights w;
};

std::unique_ptr<TestFfn> make_ffn(DType t, uint32_t seed) {
  auto f = std::make_unique<TestFfn>();
  for (int i = 0; i < 3; ++i) {
    const int64_t rows = i == 2 ? kDim : kFf, cols = i == 2 ? kFf : kDim;
    f->f32[i] = random_vec(rows * cols, seed * 3 + i, 1.0f / std::sqrt(static_cast<float>(cols)));
    const size_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> gguf(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
      cpu::quantize_row(t, f->f32[i].data() + r * cols, gguf.data() + r * rb, cols);
      cpu::dequantize_row(t, gguf.data() + r * rb, f->f32[i].data() + r * cols, cols);
    }
    const bool pack = cpu::packable(t, cols);
    f->bytes[i] = gguf;
    if (pack) {
      for (int64_t r = 0; r < rows; ++r)
        cpu::pack_row(t, gguf.data() + r * rb, f->bytes[i].data() + r * rb, cols);
    }
    f->w.part(i) = WeightMatrix{t, rows, cols, f->bytes[i].data(), "w", pack};
  }
  return f;
}

std::vector<float> run_grouped(const std::vector<FfnJob>& jobs, const std::vector<float>& x, int64_t rows,
                               int threads) {
  ThreadPool pool(threads);
  GroupedFfn ffn;
  std::vector<float> out(rows * kDim, -1.0f);
  ffn.run(jobs, {x.data(), rows, kDim}, {out.data(), kDim}, pool);
  return out;
}

// Blocks of 1 to 40 rows: the 40-row FFN gets several gate/up and down tiles.
TEST(GroupedFfn, EveryThreadCountGivesEachFfnItsOwnBits) {
  const std::vector<int64_t> block_rows = {3, 40, 1, 17, 2, 9};
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16}) {
    std::vector<std::unique_ptr<TestFfn>> ffns;
    std::vector<FfnJob> jobs;
    int64_t rows = 0;
    for (size_t j = 0; j < block_rows.size(); ++j) {
      ffns.push_back(make_ffn(t, static_cast<uint32_t>(10 + j)));
      jobs.push_back({&ffns.back()->w, rows, block_rows[j]});
      rows += block_rows[j];
    }
    const auto x = random_vec(rows * kDim, 99, 1.0f);

    // Each FFN alone, on one thread.
    std::vector<float> alone(rows * kDim);
    for (const FfnJob& job : jobs) {
      const std::vector<float> xj(x.begin() + job.row0 * kDim, x.begin() + (job.row0 + job.rows) * kDim);
      const auto y = run_grouped({{job.w, 0, job.rows}}, xj, job.rows, 1);
      std::copy(y.begin(), y.end(), alone.begin() + job.row0 * kDim);
    }
    for (int threads : {1, 2, 3, 4}) {
      for (int repeat = 0; repeat < 10; ++repeat) {
        EXPECT_EQ(run_grouped(jobs, x, rows, threads), alone) << dtype_name(t) << " threads=" << threads;
      }
    }

    // And that is down(silu(gate x) * up x), up to the rounding of the activations that
    // quantized weights see; F16 weights see them rounded to F16 (as llama.cpp's do), which
    // the reference does too.
    const double tol = t == DType::F16 ? 1e-4 : 3e-2;
    const auto seen = [&](double v) { return t == DType::F16 ? double(f16_to_f32(f32_to_f16(float(v)))) : v; };
    for (const FfnJob& job : jobs) {
      const TestFfn& f = *ffns[&job - jobs.data()];
      const int64_t r = job.row0 + job.rows - 1;  // the block's last row
      std::vector<double> mid(kFf);
      for (int64_t i = 0; i < kFf; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < kDim; ++c) {
          g += double(f.f32[0][i * kDim + c]) * seen(x[r * kDim + c]);
          u += double(f.f32[1][i * kDim + c]) * seen(x[r * kDim + c]);
        }
        mid[i] = seen(g / (1 + std::exp(-g)) * u);
      }
      for (int64_t o = 0; o < kDim; ++o) {
        double y = 0;
        for (int64_t i = 0; i < kFf; ++i) y += double(f.f32[2][o * kFf + i]) * mid[i];
        EXPECT_NEAR(alone[r * kDim + o], y, tol * (1 + std::fabs(y)))
            << dtype_name(t) << " row " << r << " out " << o;
      }
    }
  }
}

}  // namespace
}  // namespace sy
