#include "experts/grouped_ffn.h"

#include <algorithm>

#include "kernels/cpu/dot.h"

namespace sy {

void GroupedFfn::make_tiles(const std::vector<FfnJob>& jobs, bool down) {
  tiles_.clear();
  for (size_t j = 0; j < jobs.size(); ++j) {
    const WeightMatrix& w = down ? jobs[j].w.down : jobs[j].w.gate;
    // 512 KiB of weights per tile at one token; proportionally fewer rows per tile as the
    // block grows, so tiles carry similar work (multiples of 16 rows, the kernels' tile).
    // Twice the dense matmuls' tile: an expert is streamed start to end, and fewer stream
    // starts paid off a little (in-process A/B against 256 KiB, olmoe Q4_0, 2 threads, MoE
    // time: batch 1 +1.1 to +4.9%, 8 sequences +0.9%, 16 +1.1% mean of six (-0.8 to
    // +3.5%), 32 +0.5%: within the runs' noise, but never clearly worse; 1 MiB lost 8% at
    // batch 1, too few tiles for two threads).
    // A block of 16 or more tokens is compute-bound and gets tiles of at least 128 rows:
    // 16-row tiles spent ~10% of a 512-token prefill on per-tile overhead (in-process
    // A/B, Forward on olmoe Q4_0, 2 threads: +10.6% tokens/s; 32-sequence decode 1.00).
    const int64_t base = cpu::row_tile(w, int64_t{512} << 10);
    const int64_t least = jobs[j].rows >= 16 ? 128 : 16;
    const int64_t per = std::max<int64_t>(least, base / std::max<int64_t>(1, (jobs[j].rows + 3) / 4) / 16 * 16);
    for (int64_t r = 0; r < w.rows; r += per) tiles_.push_back({static_cast<int32_t>(j), r, std::min(w.rows, r + per)});
  }
  // Heaviest and lightest tiles alternately: threads claim consecutive tiles, so a
  // compute-bound tile (an expert with many tokens) tends to run beside a memory-bound one
  // (few tokens) and both the cores and the memory stay busy. Interleaved A/B runs on olmoe
  // Q4_0: batch 16 +11-14%, batch 32 +3-15% tokens/s against expert order.
  by_tokens_ = tiles_;
  std::stable_sort(by_tokens_.begin(), by_tokens_.end(),
                   [&](const Tile& a, const Tile& b) { return jobs[a.job].rows > jobs[b.job].rows; });
  for (size_t i = 0, lo = 0, hi = by_tokens_.size(); i < tiles_.size(); ++i) {
    tiles_[i] = i % 2 == 0 ? by_tokens_[lo++] : by_tokens_[--hi];
  }
}

void GroupedFfn::run(const std::vector<FfnJob>& jobs, cpu::Rows x, cpu::OutRows out, ThreadPool& pool) {
  if (jobs.empty()) return;
  const size_t nj = jobs.size();
  if (in_.size() < nj) {
    in_.resize(nj);
    in_up_.resize(nj);
    mid_in_.resize(nj);
  }
  int64_t total_rows = 0, ff = 0;
  for (const FfnJob& j : jobs) {
    total_rows = std::max(total_rows, j.row0 + j.rows);
    ff = std::max(ff, j.w.gate.rows);
  }
  if (gate_.size() < static_cast<size_t>(total_rows * ff)) {
    gate_.resize(total_rows * ff);
    up_.resize(total_rows * ff);
  }

  // 1. Inputs, once per block (gate and up share it when their layouts match).
  pool.parallel_for(static_cast<int64_t>(nj), [&](int64_t j, int) {
    const FfnJob& job = jobs[j];
    const cpu::Rows xr{x.data + job.row0 * x.ld, job.rows, x.ld};
    in_[j].prepare(job.w.gate, xr);
    if (job.w.up.dtype != job.w.gate.dtype || job.w.up.packed != job.w.gate.packed) in_up_[j].prepare(job.w.up, xr);
  });

  // 2. Gate and up rows with SwiGLU on the tile's columns.
  make_tiles(jobs, false);
  const auto swiglu = cpu::dot_kernels().swiglu;
  pool.parallel_for(static_cast<int64_t>(tiles_.size()), [&](int64_t i, int) {
    const Tile& t = tiles_[i];
    const FfnJob& job = jobs[t.job];
    const bool shared = job.w.up.dtype == job.w.gate.dtype && job.w.up.packed == job.w.gate.packed;
    float* g = gate_.data() + job.row0 * ff;
    float* u = up_.data() + job.row0 * ff;
    if (shared) {
      cpu::matmul_rows_two(job.w.gate, job.w.up, in_[t.job], {g, ff}, {u, ff}, t.r0, t.r1);
    } else {
      cpu::matmul_rows(job.w.gate, in_[t.job], {g, ff}, t.r0, t.r1);
      cpu::matmul_rows(job.w.up, in_up_[t.job], {u, ff}, t.r0, t.r1);
    }
    for (int64_t r = 0; r < job.rows; ++r) swiglu(g + r * ff + t.r0, u + r * ff + t.r0, t.r1 - t.r0);
  });

  // 3. SwiGLU outputs as inputs of the down projections.
  pool.parallel_for(static_cast<int64_t>(nj), [&](int64_t j, int) {
    const FfnJob& job = jobs[j];
    mid_in_[j].prepare(job.w.down, {gate_.data() + job.row0 * ff, job.rows, ff});
  });

  // 4. Down rows straight into the output block.
  make_tiles(jobs, true);
  pool.parallel_for(static_cast<int64_t>(tiles_.size()), [&](int64_t i, int) {
    const Tile& t = tiles_[i];
    const FfnJob& job = jobs[t.job];
    cpu::matmul_rows(job.w.down, mid_in_[t.job], {out.data + job.row0 * out.ld, out.ld}, t.r0, t.r1);
  });
}

}  // namespace sy
