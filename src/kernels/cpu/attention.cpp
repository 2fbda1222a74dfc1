#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"

namespace sy::cpu {
namespace {

constexpr int64_t kRowsPerTask = 8;  // query rows sharing one walk over the cache

void run_task(const AttentionScratch::Task& task, const float* q, int64_t q_ld, const int32_t* positions,
              const KvView& kv, const AttentionShape& s, float* out, int64_t out_ld, int64_t span, float* sc,
              const float** rows, const uint16_t** rows16) {
  const DotKernels& k = dot_kernels();
  const int group = s.n_head / s.n_head_kv;
  const int h0 = task.kv_head0 * group, h1 = task.kv_head1 * group, nh = h1 - h0;
  auto score = [&](int64_t t, int h) { return sc + ((t - task.t0) * nh + (h - h0)) * span; };

  // Head by head, so that a head's slice of the cache is reused from cache by every row.
  // (Walking blocks of positions across all heads, with software prefetch, measured no
  // faster: the hardware prefetcher follows the fixed row stride.)
  auto gather = [&](bool keys) {
    for (int64_t p = 0; p < span; ++p) {
      const void* r = keys ? kv.k(p) : kv.v(p);
      if (kv.f16) rows16[p] = static_cast<const uint16_t*>(r);
      else rows[p] = static_cast<const float*>(r);
    }
  };
  gather(true);
  for (int h = h0; h < h1; ++h) {
    for (int64_t t = task.t0; t < task.t1; ++t) {
      const float* qh = q + t * q_ld + int64_t{h} * s.head_dim_k;
      const int64_t n = int64_t{positions[t]} + 1, off = int64_t{h / group} * s.head_dim_k;
      if (kv.f16) k.dot_rows_f16(qh, rows16, n, off, s.head_dim_k, s.scale, score(t, h));
      else k.dot_rows(qh, rows, n, off, s.head_dim_k, s.scale, score(t, h));
    }
  }
  // Softmax per (row, head): the weights are normalized in place.
  for (int64_t t = task.t0; t < task.t1; ++t) {
    const int64_t n_ctx = int64_t{positions[t]} + 1;
    for (int h = h0; h < h1; ++h) softmax(score(t, h), n_ctx);
  }
  gather(false);
  for (int h = h0; h < h1; ++h) {
    for (int64_t t = task.t0; t < task.t1; ++t) {
      float* o = out + t * out_ld + int64_t{h} * s.head_dim_v;
      std::fill(o, o + s.head_dim_v, 0.0f);
      const int64_t n = int64_t{positions[t]} + 1, off = int64_t{h / group} * s.head_dim_v;
      if (kv.f16) k.weighted_rows_f16(score(t, h), rows16, n, off, s.head_dim_v, o);
      else k.weighted_rows(score(t, h), rows, n, off, s.head_dim_v, o);
    }
  }
}

}  // namespace

float* AttentionScratch::scores(int thread, size_t n) {
  auto& v = scores_[static_cast<size_t>(thread)];
  if (v.size() < n) v.resize(n);
  return v.data();
}

const float** AttentionScratch::rows(int thread, size_t n) {
  auto& v = rows_[static_cast<size_t>(thread)];
  if (v.size() < n) v.resize(n);
  return v.data();
}

const uint16_t** AttentionScratch::rows_f16(int thread, size_t n) {
  auto& v = rows_f16_[static_cast<size_t>(thread)];
  if (v.size() < n) v.resize(n);
  return v.data();
}

void attention(const float* q, int64_t q_ld, const int32_t* positions, const std::vector<AttentionRun>& runs,
               const AttentionShape& s, float* out, int64_t out_ld, ThreadPool& pool, AttentionScratch& scratch) {
  // Row blocks first; when there are too few to keep every thread busy (decode of a few
  // sequences), KV heads are split too.
  int64_t blocks = 0;
  for (const AttentionRun& r : runs) blocks += (r.n + kRowsPerTask - 1) / kRowsPerTask;
  if (blocks == 0) return;
  const int64_t want = 4 * int64_t{pool.size()};
  const int64_t splits = std::clamp<int64_t>((want + blocks - 1) / blocks, 1, s.n_head_kv);
  const int64_t heads_per_task = (s.n_head_kv + splits - 1) / splits;

  auto& tasks = scratch.tasks();
  tasks.clear();
  for (size_t r = 0; r < runs.size(); ++r) {
    for (int64_t t = runs[r].t0; t < runs[r].t0 + runs[r].n; t += kRowsPerTask) {
      for (int64_t g = 0; g < s.n_head_kv; g += heads_per_task) {
        tasks.push_back({static_cast<int32_t>(r), static_cast<int32_t>(g),
                         static_cast<int32_t>(std::min<int64_t>(s.n_head_kv, g + heads_per_task)), t,
                         std::min(runs[r].t0 + runs[r].n, t + kRowsPerTask)});
      }
    }
  }
  scratch.reserve_threads(pool.size());
  pool.parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t i, int thread) {
    const AttentionScratch::Task& task = tasks[i];
    int32_t max_pos = 0;
    for (int64_t t = task.t0; t < task.t1; ++t) max_pos = std::max(max_pos, positions[t]);
    const int64_t heads = int64_t{task.kv_head1 - task.kv_head0} * (s.n_head / s.n_head_kv);
    const int64_t span = int64_t{max_pos} + 1;
    float* sc = scratch.scores(thread, static_cast<size_t>((task.t1 - task.t0) * heads * span));
    const KvView& kv = runs[task.run].kv;
    const float** rows = kv.f16 ? nullptr : scratch.rows(thread, static_cast<size_t>(span));
    const uint16_t** rows16 = kv.f16 ? scratch.rows_f16(thread, static_cast<size_t>(span)) : nullptr;
    run_task(task, q, q_ld, positions, kv, s, out, out_ld, span, sc, rows, rows16);
  });
}

}  // namespace sy::cpu
