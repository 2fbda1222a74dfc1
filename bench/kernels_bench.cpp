// Google Benchmark micro-benchmarks of the CPU kernels. Matrix benchmarks stream a weight
// far larger than the caches, so bytes/s is the memory-side rate a decode step sees.
//   build/bench_kernels --benchmark_filter=Matmul
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/huge_pages.h"
#include "base/weight_arena.h"
#include "experts/grouped_ffn.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/stream_read.h"
#include "kernels/cpu/weight_prep.h"

namespace sy::cpu {
namespace {

struct Fixture {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
  bool tiles16 = false;  // asked for
};

// A rows x cols weight of type t with normal(0, 0.02) values, prepared as the engine does.
std::unique_ptr<Fixture> make_fixture(DType t, int64_t rows, int64_t cols, std::mt19937& rng, WeightArena& arena,
                                      ThreadPool& pool, bool tiles16) {
  auto f = std::make_unique<Fixture>();
  f->bytes.resize(dtype_row_bytes(t, cols) * rows);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(t, row.data(), f->bytes.data() + r * dtype_row_bytes(t, cols), cols);
  }
  f->w = prepare_weight(WeightMatrix{t, rows, cols, f->bytes.data(), "bench"}, arena, pool, tiles16);
  return f;
}

// A benchmark's label: the weights' type and the layout their kernels read.
std::string layout_label(const WeightMatrix& w) {
  return dtype_name(w.dtype) + (w.packed ? " packed" : w.tiles16 ? " tiles16" : "");
}

// One such weight per (type, shape), made on first use.
// (`tiles16`: in 16-row tiles where this CPU runs them, as the engine lays out its dense
// matrices; else packed.)
const WeightMatrix& weight(DType t, int64_t rows, int64_t cols, ThreadPool& pool, bool tiles16 = false) {
  static std::vector<std::unique_ptr<Fixture>> cache;
  static WeightArena arena;
  for (auto& f : cache) {
    if (f->w.dtype == t && f->w.rows == rows && f->w.cols == cols && f->tiles16 == tiles16) return f->w;
  }
  std::mt19937 rng(1);
  cache.push_back(make_fixture(t, rows, cols, rng, arena, pool, tiles16));
  cache.back()->tiles16 = tiles16;
  return cache.back()->w;
}

void matmul_bench(benchmark::State& state, DType t, bool tiles16) {
  const int64_t tokens = state.range(1);
  const int64_t cols = 2048, rows = 64 * 1024;  // 128M weights: far beyond the LLC
  ThreadPool pool(static_cast<int>(state.range(2)));
  const WeightMatrix& w = weight(t, rows, cols, pool, tiles16);
  std::vector<float> x(tokens * cols, 0.1f), y(tokens * rows);
  MatmulScratch scratch;
  for (auto _ : state) {
    matmul(w, {x.data(), tokens, cols}, {y.data(), rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes()));
  state.counters["GOPS"] = benchmark::Counter(2.0 * rows * cols * tokens * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(layout_label(w));
}
void BM_Matmul(benchmark::State& state) { matmul_bench(state, static_cast<DType>(state.range(0)), false); }
BENCHMARK(BM_Matmul)
    ->ArgsProduct({{int(DType::Q4_0), int(DType::Q8_0), int(DType::F16), int(DType::BF16)}, {1, 2, 4, 8, 16, 32}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The bandwidth reference of `switchyard bench` on a buffer of the size BM_Matmul streams,
// so that the two can be compared in one process (the machine's bandwidth drifts).
void BM_StreamRead(benchmark::State& state) {
  const size_t bytes = size_t{128} << 20;
  ThreadPool pool(static_cast<int>(state.range(0)));
  static std::vector<uint8_t> buf(bytes, 1);
  for (auto _ : state) benchmark::DoNotOptimize(stream_read(buf.data(), bytes, pool));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// One MoE layer's experts at decode, as the engine runs them: `tokens` tokens routed top-8
// over 64 experts of olmoe's shape (2048 wide, FFN 1024), a fresh layer of experts each
// iteration out of 4 (0.9 GB at Q4_0), so every expert is streamed from memory. After each
// layer the bandwidth probe reads as many bytes from a buffer beyond the LLC, so
// pct_of_probe compares the two in the same second (this VM's bandwidth drifts by 1.5x
// between runs).
void grouped_ffn_bench(benchmark::State& state, bool tiles16) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1);
  constexpr int kLayers = 4, kExperts = 64, kUsed = 8;
  constexpr int64_t kEmbd = 2048, kFf = 1024;
  ThreadPool pool(static_cast<int>(state.range(2)));
  static std::vector<std::unique_ptr<Fixture>> store;
  static WeightArena arena;
  static DType stored = DType::F32;
  static bool stored_tiles16 = false;
  static std::vector<FfnWeights> experts;
  if (stored != t || stored_tiles16 != tiles16) {
    store.clear();
    experts.clear();
    std::mt19937 rng(1);
    auto make = [&](int64_t rows, int64_t cols) {
      store.push_back(make_fixture(t, rows, cols, rng, arena, pool, tiles16));
      return store.back()->w;
    };
    for (int e = 0; e < kLayers * kExperts; ++e) {
      FfnWeights w;
      w.gate = make(kFf, kEmbd);
      w.up = make(kFf, kEmbd);
      w.down = make(kEmbd, kFf);
      experts.push_back(w);
    }
    stored = t;
    stored_tiles16 = tiles16;
  }
  std::vector<float> xs(tokens * kUsed * kEmbd, 0.1f), y(tokens * kUsed * kEmbd);
  std::mt19937 rng(7);
  GroupedFfn ffn;
  std::vector<FfnJob> jobs;
  int layer = 0;
  size_t bytes = 0, probed = 0, probe_at = 0;
  double ffn_s = 0, probe_s = 0;
  static HugePageMemory probe_buf(size_t{1} << 30, true);
  std::vector<int> ids(kExperts);
  std::iota(ids.begin(), ids.end(), 0);
  for (auto _ : state) {
    // Counts per expert from a random top-8 per token, then one job per active expert.
    std::vector<int64_t> count(kExperts, 0);
    for (int64_t i = 0; i < tokens; ++i) {
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int k = 0; k < kUsed; ++k) count[ids[k]]++;
    }
    jobs.clear();
    int64_t row0 = 0;
    for (int e = 0; e < kExperts; ++e) {
      if (count[e] == 0) continue;
      jobs.push_back({&experts[layer * kExperts + e], row0, count[e]});
      bytes += experts[layer * kExperts + e].bytes();
      row0 += count[e];
    }
    layer = (layer + 1) % kLayers;
    const auto t0 = std::chrono::steady_clock::now();
    ffn.run(jobs, {xs.data(), row0, kEmbd}, {y.data(), kEmbd}, pool);
    benchmark::DoNotOptimize(y.data());
    const auto t1 = std::chrono::steady_clock::now();
    // The same bytes read by the bandwidth probe right after, from a buffer beyond the LLC.
    const size_t want = (bytes - probed + 4095) / 4096 * 4096;
    if (probe_at + want > probe_buf.size()) probe_at = 0;
    benchmark::DoNotOptimize(stream_read(probe_buf.data() + probe_at, want, pool));
    probe_at += want;
    probed += want;
    const auto t2 = std::chrono::steady_clock::now();
    ffn_s += std::chrono::duration<double>(t1 - t0).count();
    probe_s += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["ffn_GBps"] = bytes / ffn_s / 1e9;
  state.counters["probe_GBps"] = probed / probe_s / 1e9;
  state.counters["pct_of_probe"] = 100.0 * (bytes / ffn_s) / (probed / probe_s);
  state.SetLabel(layout_label(experts[0].gate));
}
void BM_GroupedFfn(benchmark::State& state) { grouped_ffn_bench(state, false); }
// 56 tokens: a 16-sequence step that a 40-token prompt joins (its experts get ~7 each).
BENCHMARK(BM_GroupedFfn)->ArgsProduct({{int(DType::Q4_0), int(DType::Q8_0)}, {1, 16, 56}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
// The same experts in 16-row tiles (Q4_0 only: the layout's one type).
void BM_GroupedFfnTiles16(benchmark::State& state) { grouped_ffn_bench(state, true); }
BENCHMARK(BM_GroupedFfnTiles16)->ArgsProduct({{int(DType::Q4_0)}, {1, 16, 56}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// The same kernels on a 256-row matrix that stays in L2: their compute rate.
void matmul_l2_bench(benchmark::State& state, DType t, bool tiles16) {
  const int64_t tokens = state.range(1);
  const int64_t cols = state.range(2), rows = 256;  // 2048: gate/up rows of olmoe; 1024: down
  ThreadPool pool(1);
  const WeightMatrix& w = weight(t, rows, cols, pool, tiles16);
  std::vector<float> x(tokens * cols, 0.1f), y(tokens * rows);
  PreparedInput in;
  in.prepare(w, {x.data(), tokens, cols});
  for (auto _ : state) {
    matmul_rows(w, in, {y.data(), rows}, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes()));
  state.counters["GOPS"] = benchmark::Counter(2.0 * rows * cols * tokens * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(layout_label(w));
}
void BM_MatmulL2(benchmark::State& state) { matmul_l2_bench(state, static_cast<DType>(state.range(0)), false); }
BENCHMARK(BM_MatmulL2)->ArgsProduct({{int(DType::Q4_0), int(DType::Q8_0), int(DType::F16), int(DType::BF16)}, {1, 2, 3, 4, 6, 8, 16, 64}, {2048, 1024}});
// Q4_0 in the 16-row tiles the dense matrices take (the label says "packed" where this
// CPU has no tile kernels), against BM_Matmul / BM_MatmulL2's packed rows. First argument:
// unused (Q4_0), kept so the names line up with theirs.
void BM_MatmulTiles16(benchmark::State& state) { matmul_bench(state, DType::Q4_0, true); }
BENCHMARK(BM_MatmulTiles16)->ArgsProduct({{int(DType::Q4_0)}, {1, 2, 4, 8, 16, 32}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_MatmulTiles16L2(benchmark::State& state) { matmul_l2_bench(state, DType::Q4_0, true); }
BENCHMARK(BM_MatmulTiles16L2)->ArgsProduct({{int(DType::Q4_0)}, {1, 2, 3, 4, 6, 8, 16, 24, 32, 40, 64}, {2048, 1024}});

// One float-weight tile (4 rows of 2048 F32, F16 or BF16 weights x 4 tokens) in L1, per
// dot table this CPU has (0: AVX2, 2 x 2 register tiles of 8 lanes; 1: the dispatched
// table, AVX-512 tiles where present), so that the two compare in one run.
void BM_FloatTile(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const DotKernels* k = state.range(1) == 0 ? dot_kernels_avx2() : &dot_kernels();
  if (!k) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int64_t n = 2048;
  std::vector<float> wf(kFloatTile * n), x(kFloatTile * n), out(kFloatTile * kFloatTile);
  for (int64_t i = 0; i < kFloatTile * n; ++i) {
    wf[i] = 0.01f * static_cast<float>(i % 13);
    x[i] = 0.1f - 0.01f * static_cast<float>(i % 7);
  }
  std::vector<uint16_t> w16(wf.size()), xb(x.size());
  quantize_row(t == DType::BF16 ? DType::BF16 : DType::F16, wf.data(), w16.data(), kFloatTile * n);
  quantize_row(DType::BF16, x.data(), xb.data(), kFloatTile * n);
  for (auto _ : state) {
    switch (t) {
      case DType::F16: k->f16(w16.data(), n, kFloatTile, x.data(), n, kFloatTile, n, out.data(), kFloatTile, false); break;
      case DType::BF16: k->bf16(w16.data(), n, kFloatTile, xb.data(), n, kFloatTile, n, out.data(), kFloatTile, false); break;
      default: k->f32(wf.data(), n, kFloatTile, x.data(), n, kFloatTile, n, out.data(), kFloatTile, false); break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * n * kFloatTile * kFloatTile * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(dtype_name(t) + " " + k->isa);
}
BENCHMARK(BM_FloatTile)->ArgsProduct({{int(DType::F32), int(DType::F16), int(DType::BF16)}, {0, 1}});

// Packing one expert matrix (olmoe's 1024 x 2048) in place, as the expert store does with
// every matrix it reads from disk; bytes/s against the disk's rate.
void BM_PackExpert(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t rows = 1024, cols = 2048;
  const size_t rb = dtype_row_bytes(t, cols);
  std::vector<uint8_t> m(rb * rows);
  std::mt19937 rng(3);
  for (auto& b : m) b = static_cast<uint8_t>(rng());
  for (int64_t r = 0; r < rows; ++r) m[r * rb] = m[r * rb + 1] = 0;  // finite scales
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) pack_row(t, m.data() + r * rb, m.data() + r * rb, cols);
    benchmark::DoNotOptimize(m.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(m.size()));
}
BENCHMARK(BM_PackExpert)->Arg(int(DType::Q4_0))->Arg(int(DType::Q8_0));

void BM_QuantizeActivations(benchmark::State& state) {
  const int64_t cols = 2048, n = state.range(0);
  std::vector<float> x(n * cols, 0.3f);
  PackedActivations a;
  for (auto _ : state) {
    a.quantize(x.data(), n, cols, cols);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_QuantizeActivations)->Arg(1)->Arg(32);

void BM_RmsNorm(benchmark::State& state) {
  std::vector<float> x(2048, 0.5f), w(2048, 1.0f), y(2048);
  for (auto _ : state) {
    rms_norm(x.data(), w.data(), 2048, 1e-5f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_RmsNorm);

void BM_Rope(benchmark::State& state) {
  std::vector<float> q(16 * 128, 0.5f);
  RopeParams p{RopeType::Neox, 128, 10000.0f, 1.0f};
  for (auto _ : state) {
    rope(q.data(), 16, 128, 77, p);
    benchmark::DoNotOptimize(q.data());
  }
}
BENCHMARK(BM_Rope);

void BM_Attention(benchmark::State& state) {
  const int64_t ctx = state.range(0);
  const AttentionShape s{16, 16, 128, 128, 0.088f};
  const int64_t dim = 16 * 128;
  std::vector<float> k(ctx * dim, 0.01f), v(ctx * dim, 0.02f), q(dim, 0.3f), out(dim);
  AttentionScratch scratch;
  const void* kb[] = {k.data()};
  const void* vb[] = {v.data()};
  const KvView kv{kb, vb, ctx, dim, dim};
  const int32_t pos = static_cast<int32_t>(ctx - 1);
  ThreadPool pool(2);
  for (auto _ : state) {
    attention(q.data(), dim, &pos, {{0, 1, kv}}, s, out.data(), dim, pool, scratch);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Attention)->Arg(128)->Arg(1024);

// Prefill: n query rows of one sequence over its own n cached positions (causal), the
// tiled path (2 rows x 4 positions per head). FLOP/s counts QK and PV multiply-adds.
void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t n = state.range(0), dim = 16 * 128;
  const AttentionShape s{16, 16, 128, 128, 0.088f};
  std::vector<float> k(n * dim), v(n * dim), q(n * dim), out(n * dim);
  for (int64_t i = 0; i < n * dim; ++i) {  // written, so the pages are real (not the zero page)
    k[i] = 0.01f * static_cast<float>(i % 7);
    v[i] = 0.02f * static_cast<float>(i % 5);
    q[i] = 0.3f - 0.01f * static_cast<float>(i % 11);
  }
  const void* kb[] = {k.data()};
  const void* vb[] = {v.data()};
  const KvView kv{kb, vb, n, dim, dim};
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
  AttentionScratch scratch;
  ThreadPool pool(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    attention(q.data(), dim, pos.data(), {{0, n, kv}}, s, out.data(), dim, pool, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 2.0 * 2 * dim * (static_cast<double>(n) * (n + 1) / 2);
  state.counters["GFLOPS"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill)->Args({512, 1})->Args({512, 2})->UseRealTime();

// Batched decode: one query row for each of 16 sequences, every sequence with its own
// cached K/V (64 MiB in all at ctx 256 f32: read from memory, as in a served batch).
// Args: positions a sequence, bytes a cached value (4: f32, 2: f16), positions a block
// (0: one block a sequence; the engine's paged cache uses 16), layers (each call reads
// the next layer's cache: 64 layers of 16 x 96 f16 positions, 800 MB, come from memory
// as in the engine, where the expert weights stream through the last-level cache between
// two reads of a layer's cache; one layer's fits in it). Compare its bytes/s with
// BM_Matmul/2/1/2, the weight stream's rate.
void BM_AttentionDecodeBatch(benchmark::State& state) {
  const int64_t ctx = state.range(0), n_seq = 16, dim = 16 * 128;
  const KvElem elem = state.range(1) == 2 ? KvElem::F16 : KvElem::F32;
  const int64_t block = state.range(2) > 0 ? state.range(2) : ctx;
  const int64_t layers = state.range(3);
  const int64_t row_bytes = kv_row_bytes(elem, dim), blocks = (ctx + block - 1) / block;
  const AttentionShape s{16, 16, 128, 128, 0.088f};
  // On huge pages, like the engine's KV cache; the blocks of all sequences interleaved,
  // as a cache that grew them step by step hands them out.
  const size_t layer_bytes = static_cast<size_t>(2 * n_seq * blocks * block * row_bytes);
  const size_t bytes = layer_bytes * static_cast<size_t>(layers);
  HugePageMemory mem(bytes, /*prefault=*/true);
  auto* all = static_cast<uint8_t*>(mem.data());
  if (elem == KvElem::F16) {
    std::fill(reinterpret_cast<uint16_t*>(all), reinterpret_cast<uint16_t*>(all + bytes), f32_to_f16(0.01f));
  } else {
    std::fill(reinterpret_cast<float*>(all), reinterpret_cast<float*>(all + bytes), 0.01f);
  }
  std::vector<std::vector<const void*>> kb(layers * n_seq), vb(layers * n_seq);
  std::vector<std::vector<AttentionRun>> runs(layers);
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t i = 0; i < n_seq; ++i) {
      auto& k = kb[l * n_seq + i];
      auto& v = vb[l * n_seq + i];
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t at = l * layer_bytes + 2 * (b * n_seq + i) * block * row_bytes;
        k.push_back(all + at);
        v.push_back(all + at + block * row_bytes);
      }
      runs[l].push_back({i, 1, KvView{k.data(), v.data(), block, dim, dim, elem}});
    }
  }
  std::vector<float> q(n_seq * dim, 0.3f), out(n_seq * dim);
  std::vector<int32_t> pos(n_seq, static_cast<int32_t>(ctx - 1));
  AttentionScratch scratch;
  ThreadPool pool(2);
  int64_t layer = 0;
  for (auto _ : state) {
    attention(q.data(), dim, pos.data(), runs[layer], s, out.data(), dim, pool, scratch);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % layers;
  }
  state.SetBytesProcessed(state.iterations() * n_seq * ctx * row_bytes * 2);
}
BENCHMARK(BM_AttentionDecodeBatch)->Args({256, 4, 0, 1})->Args({96, 2, 16, 1})->Args({96, 2, 16, 64})->UseRealTime();

}  // namespace
}  // namespace sy::cpu

BENCHMARK_MAIN();
