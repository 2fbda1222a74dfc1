#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dot.h"

namespace sy::cpu {
namespace {

constexpr int64_t kRowsPerTask = 8;  // query rows sharing one walk over the cache

template <class T>
const T* typed(const void* p) {
  return static_cast<const T*>(p);
}

// The task's rows against its KV heads. The cache is walked position by position, each
// cached row (all of the task's KV heads side by side) read once as one contiguous stream
// and used by every row of the task: walking head by head instead reads short strided
// pieces that the prefetchers and DRAM serve ~30% slower (BM_AttentionDecodeBatch).
template <class T>
void run_task(const AttentionScratch::Task& task, const float* q, int64_t q_ld, const int32_t* positions,
              const KvView& kv, const AttentionShape& s, float* out, int64_t out_ld, int64_t span, float* sc) {
  const DotKernels& k = dot_kernels();
  const int group = s.n_head / s.n_head_kv;
  const int h0 = task.kv_head0 * group, nh = (task.kv_head1 - task.kv_head0) * group;
  const int64_t k_off = int64_t{task.kv_head0} * s.head_dim_k, v_off = int64_t{task.kv_head0} * s.head_dim_v;
  // Scores of row t, head h0 + i at position p: sc[((t - t0) * nh + i) * span + p].
  auto scores = [&](int64_t t) { return sc + (t - task.t0) * nh * span; };
  for (int64_t p = 0; p < span; ++p) {
    const T* row = typed<T>(kv.k(p)) + k_off;
    for (int64_t t = task.t0; t < task.t1; ++t) {
      if (p > positions[t]) continue;  // causal: row t sees positions 0..positions[t]
      const float* qt = q + t * q_ld + int64_t{h0} * s.head_dim_k;
      if constexpr (sizeof(T) == 2) k.dot_heads_f16(qt, row, nh, group, s.head_dim_k, s.scale, scores(t) + p, span);
      else k.dot_heads(qt, row, nh, group, s.head_dim_k, s.scale, scores(t) + p, span);
    }
  }
  for (int64_t t = task.t0; t < task.t1; ++t) {
    for (int i = 0; i < nh; ++i) k.softmax(scores(t) + i * span, int64_t{positions[t]} + 1);
    float* o = out + t * out_ld + int64_t{h0} * s.head_dim_v;
    std::fill(o, o + nh * s.head_dim_v, 0.0f);
  }
  for (int64_t p = 0; p < span; ++p) {
    const T* row = typed<T>(kv.v(p)) + v_off;
    for (int64_t t = task.t0; t < task.t1; ++t) {
      if (p > positions[t]) continue;
      float* o = out + t * out_ld + int64_t{h0} * s.head_dim_v;
      if constexpr (sizeof(T) == 2) k.axpy_heads_f16(scores(t) + p, span, row, nh, group, s.head_dim_v, o);
      else k.axpy_heads(scores(t) + p, span, row, nh, group, s.head_dim_v, o);
    }
  }
}

}  // namespace

float* AttentionScratch::scores(int thread, size_t n) {
  auto& v = scores_[static_cast<size_t>(thread)];
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
    if (kv.f16) run_task<uint16_t>(task, q, q_ld, positions, kv, s, out, out_ld, span, sc);
    else run_task<float>(task, q, q_ld, positions, kv, s, out, out_ld, span, sc);
  });
}

}  // namespace sy::cpu
