#include "experts/grouped_ffn.h"

#include <algorithm>

#include "kernels/cpu/dot.h"

namespace sy {
namespace {

// Gate and up read one prepared input, in one pass over the activations, when their
// layouts match; otherwise up gets its own.
bool gate_up_share_input(const FfnWeights& w) { return w.up.same_layout(w.gate); }

// Experts stream one after another: far prefetches cost them (RowPrefetch, packed.h).
constexpr cpu::RowPrefetch kExpertRowPrefetch = cpu::RowPrefetch::kNearOnly;

}  // namespace

void GroupedFfn::make_tiles(const std::vector<FfnJob>& jobs, bool down, int threads, std::vector<Tile>& tiles) {
  tiles.clear();
  auto matrix = [&](size_t j) -> const WeightMatrix& { return down ? jobs[j].w->down : jobs[j].w->gate; };
  int64_t job_bytes = 0;
  for (size_t j = 0; j < jobs.size(); ++j) job_bytes += static_cast<int64_t>(matrix(j).bytes());
  // At one token, tiles as long as the thread count allows (stream_tile_bytes: at 2
  // threads, whole olmoe matrices), cut evenly: each tile is a stream the hardware
  // prefetcher picks up from its start. In-process A/B, olmoe Q4_0, 2 threads, against
  // 512 KiB tiles with a short remainder (3 per matrix): batch 1 x1.04-1.07 in fast-memory
  // minutes, x1.00-1.02 in slow ones; batch 4 x1.02-1.06; batch 16 x1.01-1.02; batch 32
  // x1.02-1.03; Q8_0 batch 1 x1.01 (slow minutes). Two equal tiles per matrix gave x1.04,
  // three x1.02. (Fewer, longer tiles lost at batch 1 while the kernels prefetched in
  // software, before 2026-11-26.)
  // Proportionally fewer rows per tile as the block grows, so tiles carry similar work. A
  // block of 16 or more tokens is compute-bound and gets tiles of at least 128 rows:
  // 16-row tiles spent ~10% of a 512-token prefill on per-tile overhead (in-process A/B,
  // Forward on olmoe Q4_0, 2 threads: +10.6% tokens/s; 32-sequence decode 1.00).
  const int64_t one_token = cpu::stream_tile_bytes(job_bytes, threads);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const WeightMatrix& w = matrix(j);
    const int64_t least = jobs[j].rows >= 16 ? 128 : 16;
    const int64_t per = std::max<int64_t>(least, cpu::even_row_tile(w, one_token / std::max<int64_t>(1, (jobs[j].rows + 3) / 4)));
    for (int64_t r = 0; r < w.rows; r += per) tiles.push_back({static_cast<int32_t>(j), r, std::min(w.rows, r + per)});
  }
  // Heaviest and lightest tiles alternately: threads claim consecutive tiles, so a
  // compute-bound tile (an expert with many tokens) tends to run beside a memory-bound one
  // (few tokens) and both the cores and the memory stay busy. Interleaved A/B runs on olmoe
  // Q4_0: batch 16 +11-14%, batch 32 +3-15% tokens/s against expert order.
  // By token count, ties in the order made (job, then rows): what a stable sort gives,
  // without its temporary buffer.
  by_tokens_ = tiles;
  std::sort(by_tokens_.begin(), by_tokens_.end(), [&](const Tile& a, const Tile& b) {
    if (jobs[a.job].rows != jobs[b.job].rows) return jobs[a.job].rows > jobs[b.job].rows;
    return a.job != b.job ? a.job < b.job : a.r0 < b.r0;
  });
  for (size_t i = 0, lo = 0, hi = by_tokens_.size(); i < tiles.size(); ++i) {
    tiles[i] = i % 2 == 0 ? by_tokens_[lo++] : by_tokens_[--hi];
  }
}

// Two tiles per task: in BM_GroupedFfn (olmoe's experts, 16 tokens, 2 threads, a Xeon
// guest) three and four read 80 and 76-82% of the probe against two's 78-82%, within the
// noise of each other (docs/journal/performance.md, forty-eighth session).
constexpr int32_t kTilesPerTask = 2;

void GroupedFfn::make_tasks(const std::vector<FfnJob>& jobs, bool down, const std::vector<Tile>& tiles,
                            std::vector<Task>& tasks) {
  tasks.clear();
  auto joins = [&](const Tile& t, const Tile& u) {
    const FfnJob &a = jobs[t.job], &b = jobs[u.job];
    // The same rows of two FFNs (tiles of one FFN never share their rows).
    return a.rows <= cpu::kStreamingTokens && b.rows <= cpu::kStreamingTokens && t.r0 == u.r0 && t.r1 == u.r1 &&
           (down || (gate_up_share_input(*a.w) && gate_up_share_input(*b.w)));
  };
  for (int32_t i = 0, n = static_cast<int32_t>(tiles.size()); i < n;) {
    int32_t count = 1;
    while (count < kTilesPerTask && i + count < n && joins(tiles[i], tiles[i + count])) ++count;
    tasks.push_back({i, count});
    i += count;
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
  if (sync_capacity_ < nj) {
    sync_ = std::make_unique<FfnSync[]>(nj);
    sync_capacity_ = nj;
  }
  ff_ = 0;
  int64_t total_rows = 0;
  for (const FfnJob& j : jobs) {
    total_rows = std::max(total_rows, j.row0 + j.rows);
    ff_ = std::max(ff_, j.w->gate.rows);
  }
  if (gate_.size() < static_cast<size_t>(total_rows * ff_)) {
    gate_.resize(total_rows * ff_);
    up_.resize(total_rows * ff_);
  }
  make_tiles(jobs, false, pool.size(), up_tiles_);
  make_tiles(jobs, true, pool.size(), down_tiles_);
  for (size_t j = 0; j < nj; ++j) {
    sync_[j].input_ready.store(0, std::memory_order_relaxed);
    sync_[j].mid_ready.store(0, std::memory_order_relaxed);
    sync_[j].up_tiles_left.store(0, std::memory_order_relaxed);
  }
  for (const Tile& t : up_tiles_) sync_[t.job].up_tiles_left.fetch_add(1, std::memory_order_relaxed);
  make_tasks(jobs, false, up_tiles_, up_tasks_);
  make_tasks(jobs, true, down_tiles_, down_tasks_);

  // One job, tasks in stage order: a task only waits for earlier tasks of its FFN, which
  // are already running (ThreadPool claims tasks in order). Against one job per stage
  // (three barriers per MoE layer), in-process A/B on olmoe Q4_0, 2 threads: batch 1
  // x1.004-1.012, batch 16 x1.01-1.09.
  const auto n_prep = static_cast<int64_t>(nj);
  const auto n_up = static_cast<int64_t>(up_tasks_.size());
  const auto n_down = static_cast<int64_t>(down_tasks_.size());
  pool.parallel_for(n_prep + n_up + n_down, [&](int64_t i, int) {
    if (i < n_prep) {
      prepare_input(jobs, static_cast<size_t>(i), x);
    } else if (i < n_prep + n_up) {
      gate_up_task(jobs, up_tasks_[i - n_prep]);
    } else {
      down_task(jobs, down_tasks_[i - n_prep - n_up], out);
    }
  });
}

void GroupedFfn::prepare_input(const std::vector<FfnJob>& jobs, size_t j, cpu::Rows x) {
  const FfnJob& job = jobs[j];
  const cpu::Rows rows{x.data + job.row0 * x.ld, job.rows, x.ld};
  in_[j].prepare(job.w->gate, rows, kExpertRowPrefetch);
  if (!gate_up_share_input(*job.w)) in_up_[j].prepare(job.w->up, rows, kExpertRowPrefetch);
  sync_[j].input_ready.store(1, std::memory_order_release);
}

template <class MakeStream>
void GroupedFfn::wait_streams(const std::vector<FfnJob>& jobs, const Tile* tiles, int32_t count,
                              std::atomic<int32_t> FfnSync::*ready, MakeStream make, cpu::RowsStream* s) {
  for (int32_t k = 0; k < count; ++k) {
    const int32_t j = tiles[k].job;
    spin_until_set(sync_[j].*ready);
    s[k] = make(jobs[j], j);
  }
}

void GroupedFfn::gate_up_task(const std::vector<FfnJob>& jobs, const Task& task) {
  const Tile* tiles = up_tiles_.data() + task.first;
  cpu::RowsStream s[kTilesPerTask];
  wait_streams(jobs, tiles, task.count, &FfnSync::input_ready, [&](const FfnJob& job, int32_t j) {
    return cpu::RowsStream{&job.w->gate, &job.w->up, &in_[j], {gate_.data() + job.row0 * ff_, ff_},
                           {up_.data() + job.row0 * ff_, ff_}};
  }, s);
  if (task.count > 1) {
    cpu::matmul_rows_interleaved(s, task.count, tiles[0].r0, tiles[0].r1);
  } else if (gate_up_share_input(*jobs[tiles[0].job].w)) {
    cpu::matmul_rows_two(*s[0].a, *s[0].b, *s[0].in, s[0].ya, s[0].yb, tiles[0].r0, tiles[0].r1);
  } else {  // never paired (make_tasks): up has its own input
    cpu::matmul_rows(*s[0].a, *s[0].in, s[0].ya, tiles[0].r0, tiles[0].r1);
    cpu::matmul_rows(*s[0].b, in_up_[tiles[0].job], s[0].yb, tiles[0].r0, tiles[0].r1);
  }
  for (int32_t k = 0; k < task.count; ++k) finish_gate_up(jobs, tiles[k]);
}

void GroupedFfn::finish_gate_up(const std::vector<FfnJob>& jobs, const Tile& t) {
  const FfnJob& job = jobs[t.job];
  FfnSync& sync = sync_[t.job];
  float* g = gate_.data() + job.row0 * ff_;
  float* u = up_.data() + job.row0 * ff_;
  const auto swiglu = cpu::dot_kernels().swiglu;
  for (int64_t r = 0; r < job.rows; ++r) swiglu(g + r * ff_ + t.r0, u + r * ff_ + t.r0, t.r1 - t.r0);
  // The FFN's last gate/up tile prepares the SwiGLU output for its down tiles (acq_rel:
  // the other tiles' columns are visible to it).
  if (sync.up_tiles_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    mid_in_[t.job].prepare(job.w->down, {g, job.rows, ff_}, kExpertRowPrefetch);
    sync.mid_ready.store(1, std::memory_order_release);
  }
}

void GroupedFfn::down_task(const std::vector<FfnJob>& jobs, const Task& task, cpu::OutRows out) {
  const Tile* tiles = down_tiles_.data() + task.first;
  cpu::RowsStream s[kTilesPerTask];
  wait_streams(jobs, tiles, task.count, &FfnSync::mid_ready, [&](const FfnJob& job, int32_t j) {
    return cpu::RowsStream{&job.w->down, nullptr, &mid_in_[j], {out.data + job.row0 * out.ld, out.ld}, {nullptr, 0}};
  }, s);
  if (task.count == 1) {
    cpu::matmul_rows(*s[0].a, *s[0].in, s[0].ya, tiles[0].r0, tiles[0].r1);
  } else {
    cpu::matmul_rows_interleaved(s, task.count, tiles[0].r0, tiles[0].r1);
  }
}

}  // namespace sy
