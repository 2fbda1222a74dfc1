#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"

namespace sy::cpu {
namespace {

constexpr int64_t kRowsPerTask = 8;  // query rows sharing one walk over the cache
// A decode row's cached positions go in chunks of this many, counted from position 0, and
// its chunks' partial softmaxes merge in position order: so its outputs depend on its
// position alone, not on the batch or the thread count.
constexpr int64_t kDecodeChunk = 64;

template <class T>
const T* typed(const void* p) {
  return static_cast<const T*>(p);
}

// The tile kernels for rows of T (f32 or f16; prompt rows over a q8_0 cache read an f32
// copy, see attention()), over every head.
template <class T>
void dot_tile_rows(const DotKernels& k, const float* q, int64_t q_ld, int64_t nq, const T* const* kr, int nk, int64_t d,
                   float scale, float* out, int64_t ld, TileHeads heads) {
  if constexpr (sizeof(T) == 2) k.dot_tile_f16(q, q_ld, nq, kr, nk, d, scale, out, ld, heads);
  else k.dot_tile(q, q_ld, nq, kr, nk, d, scale, out, ld, heads);
}

template <class T>
void axpy_tile_rows(const DotKernels& k, const float* w, int64_t ld, int64_t nq, const T* const* vr, int nk, int64_t d,
                    float* out, int64_t out_ld, TileHeads heads) {
  if constexpr (sizeof(T) == 2) k.axpy_tile_f16(w, ld, nq, vr, nk, d, out, out_ld, heads);
  else k.axpy_tile(w, ld, nq, vr, nk, d, out, out_ld, heads);
}

// Whether the walk prefetches the next block of cached rows into L1 while the kernels work
// on this one. Zen 5 EPYC guest (family 26), BM_AttentionDecodeBatch f16 from memory, 16
// sequences, 2 threads, six in-process pairs: 25.0 against 21.9 GB/s, every pair the same
// way (the f32 case x1.12; a block further ahead, or into L2 only, gained nothing). On Zen 4
// prefetching the rows ahead slowed the walk (x0.65-0.79, twenty-second and twenty-fourth
// sessions); Intel is not measured, so it stays off there.
bool prefetch_next_rows() {
  static const bool on = cpu_is_amd() && cpu_family() >= 26;
  return on;
}

// Cached positions [p0, p1) in blocks of up to 4: fn(p, nk, rows), rows[j] being position
// p + j's cached keys (or values), all KV heads side by side. The block's rows stay in L1
// while the tile kernels go through the heads; the next block's are asked for meanwhile
// where that pays (prefetch_next_rows).
template <class T, class Fn>
void for_position_blocks(const KvView& kv, bool values, int64_t p0, int64_t p1, Fn&& fn) {
  const bool prefetch = prefetch_next_rows();
  const int64_t row_bytes = kv_row_bytes(kv.elem, values ? kv.v_ld : kv.k_ld);
  auto row = [&](int64_t p) { return typed<T>(values ? kv.v(p) : kv.k(p)); };
  // Each row is looked up once: the next block's rows, prefetched or not, are this block's
  // on the next turn.
  const T* rows[4];
  const T* next[4];
  for (int64_t j = 0; j < std::min<int64_t>(4, p1 - p0); ++j) rows[j] = row(p0 + j);
  for (int64_t p = p0; p < p1; p += 4) {
    const int nk = static_cast<int>(std::min<int64_t>(4, p1 - p));
    const int n_next = static_cast<int>(std::clamp<int64_t>(p1 - p - 4, 0, 4));
    for (int j = 0; j < n_next; ++j) {
      next[j] = row(p + 4 + j);
      if (prefetch) {
        const auto* bytes = reinterpret_cast<const uint8_t*>(next[j]);
        for (int64_t at = 0; at < row_bytes; at += 64) __builtin_prefetch(bytes + at, 0, 3);
      }
    }
    fn(p, nk, rows);
    std::copy(next, next + n_next, rows);
  }
}

// The task's rows against every head over cached positions [p0, p1). The cache is walked
// position by position, each cached row (all KV heads side by side) read once as one
// contiguous stream and used by every row and head of the task: walking head by head
// instead reads short strided pieces that the prefetchers and DRAM serve ~30% slower
// (BM_AttentionDecodeBatch). A task that covers every position writes normalized outputs
// to `o`; a chunk of the positions (part != null) writes unnormalized sums there and each
// (row, head)'s score max and exp sum to part_max / part_sum, merged afterwards.
template <class T>
void run_task(const AttentionScratch::Task& task, const float* q, int64_t q_ld, const int32_t* positions,
              const KvView& kv, const AttentionShape& s, float* o, int64_t o_ld, float* part_max, float* part_sum,
              float* sc) {
  const DotKernels& k = dot_kernels();
  const int group = s.n_head / s.n_head_kv, nh = s.n_head;
  const int64_t p0 = task.p0, span = task.p1 - task.p0;
  // Scores of row t, head h at position p: sc[((t - t0) * nh + h) * span + p - p0].
  auto scores = [&](int64_t t) { return sc + (t - task.t0) * nh * span; };
  auto seen = [&](int64_t t) { return std::clamp<int64_t>(int64_t{positions[t]} + 1 - p0, 0, span); };
  // Row t's outputs: batch row t of `out`, or row t - t0 of a chunk's partial slot.
  const int64_t o_row0 = part_max ? task.t0 : 0;
  auto out_row = [&](int64_t t) { return o + (t - o_row0) * o_ld; };
  // Tiles of the task's rows x 4 positions, head after head inside one kernel call, over
  // blocks of 4 cached rows that stay in L1 across the heads. For several rows of one
  // sequence (a prompt): row by row, each score cost a horizontal sum and each K/V vector a
  // load per row (512 rows of one sequence, 16 heads of 128, one thread: 28 -> 44 GFLOP/s;
  // prefill of 512 tokens +7-9%, in-process A/B). For a decode row: four rows read at once
  // keep more of them in flight from memory than one row after the other
  // (BM_AttentionDecodeBatch, f16 from memory: 15.4-17.5 against 12.7-13.1 GB/s). Rows that
  // do not see a position of a block get scores there all the same, zeroed after the
  // softmax.
  const int64_t rows = task.t1 - task.t0;
  // q8_0 rows have no tile kernels: they go row by row (attention() gives prompt rows
  // over a q8_0 cache an f32 copy instead).
  constexpr bool tiled = !std::is_same_v<T, BlockQ8_0>;
  const int64_t dk = s.head_dim_k, dv = s.head_dim_v, row_ld = nh * span;
  const TileHeads heads{nh, group, span};  // row t's head h scores at scores(t) + h * span
  int32_t last_pos = 0;
  for (int64_t t = task.t0; t < task.t1; ++t) last_pos = std::max(last_pos, positions[t]);
  const int64_t p_end = std::min<int64_t>(task.p1, int64_t{last_pos} + 1);
  if constexpr (tiled) {
    for_position_blocks<T>(kv, false, p0, p_end, [&](int64_t p, int nk, const T* const* kr) {
      dot_tile_rows(k, q + task.t0 * q_ld, q_ld, rows, kr, nk, dk, s.scale, scores(task.t0) + p - p0, row_ld, heads);
    });
  } else {
    for (int64_t p = p0; p < task.p1; ++p) {
      const T* row = typed<T>(kv.k(p));
      for (int64_t t = task.t0; t < task.t1; ++t) {
        if (p > positions[t]) continue;  // causal: row t sees positions 0..positions[t]
        k.dot_heads_q8(q + t * q_ld, row, nh, group, dk, s.scale, scores(t) + p - p0, span);
      }
    }
  }
  for (int64_t t = task.t0; t < task.t1; ++t) {
    const int64_t n = seen(t);
    for (int h = 0; h < nh; ++h) {
      float* w = scores(t) + h * span;
      float max = -INFINITY, sum = 0.0f;
      if (n > 0) sum = k.exp_minus_max(w, n, &max);
      if (part_max) {
        part_max[(t - task.t0) * nh + h] = max;
        part_sum[(t - task.t0) * nh + h] = sum;
      } else {
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < n; ++i) w[i] *= inv;
      }
      if (tiled) std::fill(w + n, w + span, 0.0f);  // positions this row does not see, inside a tile
    }
    std::fill(out_row(t), out_row(t) + nh * dv, 0.0f);
  }
  if constexpr (tiled) {
    for_position_blocks<T>(kv, true, p0, p_end, [&](int64_t p, int nk, const T* const* vr) {
      axpy_tile_rows(k, scores(task.t0) + p - p0, row_ld, rows, vr, nk, dv, out_row(task.t0), o_ld, heads);
    });
  } else {
    for (int64_t p = p0; p < task.p1; ++p) {
      const T* row = typed<T>(kv.v(p));
      for (int64_t t = task.t0; t < task.t1; ++t) {
        if (p > positions[t]) continue;
        k.axpy_heads_q8(scores(t) + p - p0, span, row, nh, group, dv, out_row(t));
      }
    }
  }
}

// Prompt rows (runs of 2 or more rows) over a q8_0 cache.
bool needs_f32_copy(const AttentionRun& r) { return r.kv.elem == KvElem::Q8_0 && r.n >= 2; }

// Positions of a run's f32 copy: all its rows see, for prompt rows over a q8_0 cache; else 0.
int64_t copied_positions(const AttentionRun& r, const int32_t* positions) {
  if (!needs_f32_copy(r)) return 0;
  int64_t span = 0;
  for (int64_t t = r.t0; t < r.t0 + r.n; ++t) span = std::max<int64_t>(span, int64_t{positions[t]} + 1);
  return span;
}

// Prompt rows (runs of 2 or more rows) over a q8_0 cache read an f32 copy of the positions
// they see, dequantized once per call across the threads, so that the tile kernels run on
// it; dequantizing in every tile redid each cached row for every task of 8 rows (prefill of
// 512 tokens: softmax(QK)V 415-453 ms against 150-164 over f16). Returns `runs` itself when
// no run needs a copy. Decode rows keep reading the q8_0 cache.
const std::vector<AttentionRun>& with_f32_prompts(const std::vector<AttentionRun>& runs, const int32_t* positions,
                                                  ThreadPool& pool, AttentionScratch& scratch) {
  if (std::none_of(runs.begin(), runs.end(), needs_f32_copy)) return runs;
  AttentionScratch::F32Copies& c = scratch.f32_copies();
  std::vector<AttentionRun>& out = c.runs;
  std::vector<int64_t>& span = c.span;
  std::vector<int64_t>& offset = c.offset;
  span.assign(runs.size(), 0);
  offset.assign(runs.size(), 0);
  size_t total = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    span[r] = copied_positions(runs[r], positions);
    if (span[r] == 0) continue;
    offset[r] = static_cast<int64_t>(total);
    total += static_cast<size_t>(span[r] * (runs[r].kv.k_ld + runs[r].kv.v_ld));
  }
  if (c.values.size() < total) c.values.resize(total);
  float* values = c.values.data();
  std::vector<const void*>& blocks = c.blocks;
  blocks.assign(2 * runs.size(), nullptr);
  out = runs;
  std::vector<std::pair<size_t, int64_t>>& chunks = c.chunks;
  chunks.clear();
  for (size_t r = 0; r < runs.size(); ++r) {
    if (span[r] == 0) continue;
    const KvView& kv = runs[r].kv;
    float* k = values + offset[r];
    blocks[2 * r] = k;
    blocks[2 * r + 1] = k + span[r] * kv.k_ld;
    out[r].kv = KvView{&blocks[2 * r], &blocks[2 * r + 1], span[r], kv.k_ld, kv.v_ld, KvElem::F32};
    for (int64_t p = 0; p < span[r]; p += 64) chunks.push_back({r, p});
  }
  const auto to_f32 = dot_kernels().q8_to_f32;
  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t i, int) {
    const auto [r, p0] = chunks[i];
    const KvView& kv = runs[r].kv;
    float* k = values + offset[r];
    float* v = k + span[r] * kv.k_ld;
    for (int64_t p = p0; p < std::min(span[r], p0 + 64); ++p) {
      to_f32(static_cast<const BlockQ8_0*>(kv.k(p)), k + p * kv.k_ld, kv.k_ld);
      to_f32(static_cast<const BlockQ8_0*>(kv.v(p)), v + p * kv.v_ld, kv.v_ld);
    }
  });
  return out;
}

}  // namespace

float* AttentionScratch::parts(size_t n) {
  if (parts_.size() < n) parts_.resize(n);
  return parts_.data();
}

float* AttentionScratch::scores(int thread, size_t n) {
  auto& v = scores_[static_cast<size_t>(thread)];
  if (v.size() < n) v.resize(n);
  return v.data();
}

namespace {

// Floats of the f32 copy a run needs, else 0.
size_t copy_floats(const AttentionRun& r, const int32_t* positions) {
  return static_cast<size_t>(copied_positions(r, positions) * (r.kv.k_ld + r.kv.v_ld));
}

void attend(const float* q, int64_t q_ld, const int32_t* positions, const std::vector<AttentionRun>& runs_in,
            const AttentionShape& s, float* out, int64_t out_ld, ThreadPool& pool, AttentionScratch& scratch) {
  const std::vector<AttentionRun>& runs = with_f32_prompts(runs_in, positions, pool, scratch);
  // Tasks of up to kRowsPerTask rows of one sequence. A decode row (a sequence's only row in
  // the batch) is split into fixed chunks of its cached positions (split-K, as flash-decoding
  // does) whatever the batch: chunks sized to keep the threads busy merged in an order that
  // depended on the batch and the thread count, so a seeded request sampled other text on a
  // busy server (7 of 48 at temperature 1.5, thirty-ninth session). Prompt rows are never
  // split: they come in blocks of up to 8 rows, tasks enough.
  if (std::all_of(runs.begin(), runs.end(), [](const AttentionRun& r) { return r.n == 0; })) return;
  const int64_t part_floats = kRowsPerTask * s.n_head * (s.head_dim_v + 2);

  auto& tasks = scratch.tasks();
  auto& merges = scratch.merges();
  tasks.clear();
  merges.clear();
  int32_t n_parts = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (int64_t t = runs[r].t0; t < runs[r].t0 + runs[r].n; t += kRowsPerTask) {
      const int64_t t1 = std::min(runs[r].t0 + runs[r].n, t + kRowsPerTask);
      int32_t max_pos = 0;
      for (int64_t i = t; i < t1; ++i) max_pos = std::max(max_pos, positions[i]);
      const int64_t span = int64_t{max_pos} + 1;
      const int64_t chunks = runs[r].n == 1 ? (span + kDecodeChunk - 1) / kDecodeChunk : 1;
      if (chunks == 1) {
        tasks.push_back({static_cast<int32_t>(r), t, t1, 0, span, -1});
        continue;
      }
      merges.push_back({t, t1, n_parts, static_cast<int32_t>(chunks)});
      for (int64_t c = 0; c < chunks; ++c) {
        tasks.push_back({static_cast<int32_t>(r), t, t1, c * kDecodeChunk, std::min(span, (c + 1) * kDecodeChunk),
                         n_parts++});
      }
    }
  }
  float* parts = scratch.parts(static_cast<size_t>(n_parts * part_floats));
  auto part_o = [&](int32_t i) { return parts + i * part_floats; };
  auto part_max = [&](int32_t i) { return part_o(i) + kRowsPerTask * s.n_head * s.head_dim_v; };
  auto part_sum = [&](int32_t i) { return part_max(i) + kRowsPerTask * s.n_head; };

  scratch.reserve_threads(pool.size());
  pool.parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t i, int thread) {
    const AttentionScratch::Task& task = tasks[i];
    float* sc = scratch.scores(thread, static_cast<size_t>((task.t1 - task.t0) * s.n_head * (task.p1 - task.p0)));
    const KvView& kv = runs[task.run].kv;
    const bool whole = task.part < 0;
    float* o = whole ? out : part_o(task.part);
    const int64_t o_ld = whole ? out_ld : s.n_head * s.head_dim_v;
    float* pm = whole ? nullptr : part_max(task.part);
    float* ps = whole ? nullptr : part_sum(task.part);
    switch (kv.elem) {
      case KvElem::F16: run_task<uint16_t>(task, q, q_ld, positions, kv, s, o, o_ld, pm, ps, sc); break;
      case KvElem::Q8_0: run_task<BlockQ8_0>(task, q, q_ld, positions, kv, s, o, o_ld, pm, ps, sc); break;
      default: run_task<float>(task, q, q_ld, positions, kv, s, o, o_ld, pm, ps, sc);
    }
  });

  // Chunks of one row block: out = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) s_c.
  const int64_t hv = s.head_dim_v;
  pool.parallel_for(static_cast<int64_t>(merges.size()), [&](int64_t i, int) {
    const AttentionScratch::Merge& m = merges[i];
    for (int64_t t = m.t0; t < m.t1; ++t) {
      const int64_t r = t - m.t0;
      for (int h = 0; h < s.n_head; ++h) {
        float max = -INFINITY;
        for (int32_t c = 0; c < m.n_parts; ++c) max = std::max(max, part_max(m.part0 + c)[r * s.n_head + h]);
        float denom = 0.0f;
        float* o = out + t * out_ld + h * hv;
        std::fill(o, o + hv, 0.0f);
        for (int32_t c = 0; c < m.n_parts; ++c) {
          const float pmax = part_max(m.part0 + c)[r * s.n_head + h];
          if (pmax == -INFINITY) continue;  // a chunk past this row's position
          const float f = std::exp(pmax - max);
          denom += f * part_sum(m.part0 + c)[r * s.n_head + h];
          const float* po = part_o(m.part0 + c) + (r * s.n_head + h) * hv;
          for (int64_t j = 0; j < hv; ++j) o[j] += f * po[j];
        }
        const float inv = 1.0f / denom;
        for (int64_t j = 0; j < hv; ++j) o[j] *= inv;
      }
    }
  });
}

}  // namespace

void attention(const float* q, int64_t q_ld, const int32_t* positions, const std::vector<AttentionRun>& runs,
               const AttentionShape& s, float* out, int64_t out_ld, ThreadPool& pool, AttentionScratch& scratch) {
  size_t total = 0;
  for (const AttentionRun& r : runs) total += copy_floats(r, positions);
  if (total <= scratch.max_copy_floats) return attend(q, q_ld, positions, runs, s, out, out_ld, pool, scratch);
  // Runs are independent (each writes only its own rows), so they can go in groups.
  std::vector<AttentionRun>& group = scratch.group();
  group.clear();
  size_t held = 0;
  for (const AttentionRun& r : runs) {
    const size_t need = copy_floats(r, positions);
    if (!group.empty() && held + need > scratch.max_copy_floats) {
      attend(q, q_ld, positions, group, s, out, out_ld, pool, scratch);
      group.clear();
      held = 0;
    }
    group.push_back(r);
    held += need;
  }
  attend(q, q_ld, positions, group, s, out, out_ld, pool, scratch);
}

}  // namespace sy::cpu
