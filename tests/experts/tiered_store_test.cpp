// The expert-buffering store gives bit-identical logits to the all-resident model whatever
// the cache size (one expert per layer, 25%, 100%), counts hits and misses, and rejects
// bad sizes with a clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/cache_sim.h"
#include "analysis/trace_helpers.h"
#include "base/error.h"
#include "experts/allocation_counter.h"
#include "experts/cache_use.h"
#include "experts/profile_pins.h"
#include "experts/tiered_expert_store.h"
#include "experts/trace.h"
#include "kernels/cpu/weight_prep.h"
#include "model/model.h"
#include "model/packed_file.h"
#include "model/synth.h"
#include "runtime/session.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

std::vector<float> run(const Model& m, const std::vector<int32_t>& prompt, int gen) {
  ThreadPool pool(2);
  Session s(m, pool, 128);
  s.eval(prompt, true);
  const int64_t nv = m.hparams().n_vocab;
  std::vector<float> out(s.logits(0), s.logits(0) + prompt.size() * nv);
  // Then a few greedy steps through the KV cache: every step routes anew.
  for (int i = 0; i < gen; ++i) {
    const float* l = s.logits(0);
    s.eval({static_cast<int32_t>(std::max_element(l, l + nv) - l)});
    out.insert(out.end(), s.logits(0), s.logits(0) + nv);
  }
  return out;
}

// Budgets: one expert per MoE layer, 25% and 100% of all expert bytes.
std::vector<std::string> budgets(const Model& m) {
  const HParams& h = m.hparams();
  const size_t unit = m.all_expert_bytes() / (static_cast<size_t>(h.n_expert) * (h.n_layer - h.n_layer_dense_lead));
  return {std::to_string(unit * (h.n_layer - h.n_layer_dense_lead)), "0.25", "100%"};
}

// repacks: the store repacks the experts it reads (Q4_0 rows the packed layout takes, in
// a file not packed by `switchyard pack`, on a CPU with packed kernels). want: the logits
// to match (default: the file's all-resident run).
void expect_identical(const std::string& path, const std::vector<int32_t>& prompt, bool repacks,
                      std::vector<float> want = {}) {
  auto resident = Model::load(path);
  if (want.empty()) want = run(*resident, prompt, 6);
  for (const std::string& b : budgets(*resident)) {
    // Reads through the I/O threads' bounce buffers (the default) and straight into the slots.
    for (auto [prefetch, bounce] : {std::pair{true, true}, {false, true}, {true, false}}) {
      ModelOptions o;
      o.expert_cache = b;
      o.tiered.predictive_prefetch = prefetch;
      if (!bounce) o.tiered.bounce_bytes = 0;
      auto tiered = Model::load(path, o);
      ASSERT_NE(tiered->tiered_experts(), nullptr);
      EXPECT_EQ(run(*tiered, prompt, 6), want)
          << path << " cache " << b << " prefetch " << prefetch << " bounce " << bounce;
      const ExpertStoreStats& st = tiered->tiered_experts()->stats();
      EXPECT_GT(st.hits + st.misses, 0);
      if (b == "100%") EXPECT_LE(st.misses, tiered->tiered_experts()->capacity());  // only cold misses
      else EXPECT_GT(st.misses, 0);
      // Loaded experts are repacked exactly where the resident store packs its own.
      if (repacks) EXPECT_GT(st.pack_seconds, 0.0);
      else EXPECT_EQ(st.pack_seconds, 0.0);
    }
  }
}

TEST(ExpertStore, IdenticalLogitsDefaultModel) {
  expect_identical(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf", {1, 450, 7458, 411, 23226, 338}, false);
}

TEST(ExpertStore, IdenticalLogitsPackedQ4_0) {
  // Rows of 512 and 768 values so that the Q4_0 experts use the packed layout where the
  // CPU has it: a whole group pair, and a pair plus an odd group.
  SynthOptions o;
  o.shape = synth_preset("tiny").shape;
  o.shape.arch = "olmoe";
  o.shape.n_embd = 512;
  o.shape.n_head = 4;
  o.shape.n_head_kv = 4;
  o.shape.n_ff = 768;
  o.shape.n_expert = 16;
  o.shape.n_expert_used = 4;
  o.type = DType::Q4_0;
  o.router_skew = 0.5;
  test::TempFile f;
  ThreadPool pool(2);
  write_synth_model(f.path(), o, pool);
  const std::vector<int32_t> prompt = {3, 17, 99, 5, 42, 7, 250, 11};
  expect_identical(f.path(), prompt, cpu::packing_enabled());
  // The `switchyard pack` copy: experts come off the disk in the kernels' layout, nothing
  // is repacked, and the logits are the source file's (its packed kernels are the ones
  // the source runs where packing is enabled).
  test::TempFile packed;
  write_packed_model(f.path(), packed.path(), pool);
  if (cpu::packing_enabled()) expect_identical(packed.path(), prompt, false, run(*Model::load(f.path()), prompt, 6));
  else expect_identical(packed.path(), prompt, false);
}

// The reader's accounting: reads one at a time keep the disk busy exactly as long as they
// take; reads on the I/O threads overlap (busy no longer than their summed time) and each
// counts its time in the queue.
// Direct reads into 4 KiB pages go out as small DMA segments; the store tells how much of
// its slots got huge pages, and the warning names the fix for the host's THP mode.
TEST(ExpertStore, SaysWhetherItsSlotsAreOnHugePages) {
  ModelOptions o;
  o.expert_cache = "50%";
  auto m = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf", o);
  if (std::ifstream("/proc/self/smaps").good()) {
    const double f = m->tiered_experts()->slot_huge_page_fraction();
    EXPECT_GE(f, 0.0);  // the slots are touched at start-up, so they are resident
    EXPECT_LE(f, 1.0);
    if (transparent_huge_page_mode() == "never") {
      EXPECT_EQ(f, 0.0);
    }
  }

  EXPECT_EQ(slot_huge_page_warning(1.0, "madvise"), "");
  EXPECT_EQ(slot_huge_page_warning(0.5, "always"), "");
  EXPECT_EQ(slot_huge_page_warning(-1.0, ""), "");  // unknown: nothing to say
  const std::string off = slot_huge_page_warning(0.0, "never");
  EXPECT_NE(off.find("only 0% of the expert cache's slots"), std::string::npos) << off;
  EXPECT_NE(off.find("transparent huge pages: never"), std::string::npos) << off;
  EXPECT_NE(off.find("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"), std::string::npos) << off;
  const std::string fragmented = slot_huge_page_warning(0.25, "madvise");
  EXPECT_NE(fragmented.find("only 25%"), std::string::npos) << fragmented;
  EXPECT_NE(fragmented.find("compact_memory"), std::string::npos) << fragmented;
  EXPECT_EQ(fragmented.find("echo madvise"), std::string::npos) << fragmented;
}

TEST(DirectReaderStats, CountsReadsBusyTimeAndQueueing) {
  test::TempFile f(".bin");
  std::vector<uint8_t> bytes(size_t{4} << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  f.write(bytes);
  DirectReader reader(f.path(), 4);
  const size_t len = 300000;
  std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(DirectReader::span_bytes(len) + DirectReader::kAlign));
  auto aligned = [](std::vector<uint8_t>& b) {
    const auto p = reinterpret_cast<uintptr_t>(b.data());
    return b.data() + (DirectReader::kAlign - p % DirectReader::kAlign) % DirectReader::kAlign;
  };
  for (int i = 0; i < 3; ++i) {
    const uint8_t* got = reader.read(aligned(bufs[0]), 1000 + i * len, len);
    ASSERT_EQ(got[0], bytes[1000 + i * len]);
  }
  ReadStats a = reader.stats();
  EXPECT_EQ(a.reads, 3);
  EXPECT_EQ(a.queued, 0);
  EXPECT_GT(a.busy_seconds, 0.0);
  EXPECT_NEAR(a.busy_seconds, a.read_seconds, 1e-9);
  std::atomic<int> left{8};
  for (int i = 0; i < 8; ++i) {
    reader.submit([&, i] {
      reader.read(aligned(bufs[i]), 4096 + i * len, len);
      left--;
    });
  }
  while (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const ReadStats b = reader.stats();
  EXPECT_EQ(b.reads, 11);
  EXPECT_EQ(b.queued, 8);
  EXPECT_GE(b.queue_seconds, 0.0);
  EXPECT_GT(b.busy_seconds, a.busy_seconds);
  EXPECT_LE(b.busy_seconds - a.busy_seconds, b.read_seconds - a.read_seconds + 1e-9);
  EXPECT_EQ(b.copy_seconds, 0.0) << "no bounce buffers, no copies";
}

// Reads through a bounce buffer smaller than the read (so in pieces) give the file's bytes,
// at unaligned offsets and up to the end of a file whose length is no multiple of the
// alignment; a read on a thread that is not one of the reader's goes straight to its buffer.
TEST(DirectReaderBounce, CopiesEveryPieceToItsPlace) {
  test::TempFile f(".bin");
  std::vector<uint8_t> bytes(size_t{1} << 20 | 12345);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 11));
  f.write(bytes);
  DirectReader reader(f.path(), 2, 3 * DirectReader::kAlign);
  EXPECT_EQ(reader.bounce_bytes(), 3 * DirectReader::kAlign);
  const std::vector<FileRange> ranges = {{0, 100},
                                         {777, 50000},
                                         {4096, 3 * 4096},
                                         {123457, 300001},
                                         {bytes.size() - 20000, 20000},
                                         {bytes.size() - 5, 5}};
  std::vector<std::vector<uint8_t>> bufs(ranges.size());
  std::vector<const uint8_t*> got(ranges.size());
  auto aligned = [](std::vector<uint8_t>& b, size_t len) {
    b.assign(DirectReader::span_bytes(len) + DirectReader::kAlign, 0);
    const auto p = reinterpret_cast<uintptr_t>(b.data());
    return b.data() + (DirectReader::kAlign - p % DirectReader::kAlign) % DirectReader::kAlign;
  };
  std::atomic<int> left{static_cast<int>(ranges.size())};
  for (size_t i = 0; i < ranges.size(); ++i) {
    uint8_t* buf = aligned(bufs[i], ranges[i].len);
    reader.submit([&, i, buf] {
      got[i] = reader.read(buf, ranges[i].offset, ranges[i].len);
      left--;
    });
  }
  while (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto want = bytes.begin() + static_cast<std::ptrdiff_t>(ranges[i].offset);
    EXPECT_TRUE(std::equal(got[i], got[i] + ranges[i].len, want)) << "range " << i;
  }
  // The copies out of the bounce buffers are timed apart, inside each read's time.
  const ReadStats st = reader.stats();
  EXPECT_GT(st.copy_seconds, 0.0);
  EXPECT_LE(st.copy_seconds, st.read_seconds);
  std::vector<uint8_t> own;
  const uint8_t* p = reader.read(aligned(own, 70000), 9999, 70000);
  EXPECT_TRUE(std::equal(p, p + 70000, bytes.begin() + 9999));
  EXPECT_THROW(reader.read(aligned(own, 10), bytes.size() - 4, 10), Error);
}

// The I/O queue: urgent jobs go first, the rest in order, through the ring's growth; and
// once the ring has grown, submitting a job whose captures fit std::function's inline
// buffer allocates nothing (the expert store submits every load this way).
TEST(DirectReaderQueue, RunsUrgentFirstAndAllocatesNothing) {
  test::TempFile f(".bin");
  f.write(std::vector<uint8_t>(4096, 1));
  DirectReader reader(f.path(), 1);
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<bool> holding{false};
  std::vector<int> order;
  reader.submit([&] {  // holds the only I/O thread until everything is queued
    holding = true;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  });
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int n = 600;  // more than the ring's first size
  std::vector<int> want;
  for (int i = 0; i < n; ++i) {
    const bool urgent = i % 100 == 7;
    reader.submit([&order, i] { order.push_back(i); }, urgent);
    if (urgent) want.insert(want.begin(), i);
  }
  for (int i = 0; i < n; ++i)
    if (i % 100 != 7) want.push_back(i);
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  std::atomic<bool> done{false};
  reader.submit([&] { done = true; });
  while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(order, want);

  std::atomic<int> ran{0};
  const int64_t control = test::allocations_on_this_thread();
  auto* probe = new std::vector<int>(8);  // the counter sees allocations at all
  delete probe;
  ASSERT_GE(test::allocations_on_this_thread(), control + 2);
  const int64_t before = test::allocations_on_this_thread();
  for (int i = 0; i < 200; ++i) reader.submit([&ran, i] { ran += i >= 0; });
  EXPECT_EQ(test::allocations_on_this_thread(), before);
  while (ran < 200) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(ExpertStore, RejectsBadSizes) {
  const std::string path = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  for (const char* bad : {"abc", "12XB", "-1", "0", "1KB"}) {
    ModelOptions o;
    o.expert_cache = bad;
    try {
      Model::load(path, o);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expert"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_expert_cache_size("2GB", 100), size_t{2} << 30);
  EXPECT_EQ(parse_expert_cache_size("0.5", 1000), 500u);
  EXPECT_EQ(parse_expert_cache_size("25%", 1000), 250u);
  EXPECT_EQ(parse_expert_cache_size("4096", 1000), 4096u);
  EXPECT_EQ(parse_expert_cache_size("100%", 1000), 1000u);
  EXPECT_EQ(parse_expert_cache_size("8GB", 1000), size_t{8} << 30);  // a budget beyond the experts: all of them
  // A share above 100% (a typo), a fraction of a byte and sizes no size_t holds are refused, naming the flag.
  for (const char* bad : {"150%", "1e30", "1e20GB", "inf", "nan%", "1.5", "4096.5"}) {
    try {
      parse_expert_cache_size(bad, 1000);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--expert-cache '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

// Prefetch depth by cache size when --prefetch-layers is not given, and what a model
// loaded with each cache size uses.
TEST(ExpertStore, PrefetchDepthFollowsCacheSize) {
  EXPECT_EQ(auto_prefetch_layers(250, 1000), 1);
  EXPECT_EQ(auto_prefetch_layers(666, 1000), 1);
  EXPECT_EQ(auto_prefetch_layers(667, 1000), 2);
  EXPECT_EQ(auto_prefetch_layers(2000, 1000), 2);
  const std::string path = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  for (const auto& [cache, layers] : std::vector<std::pair<std::string, int>>{{"25%", 1}, {"75%", 2}}) {
    ModelOptions o;
    o.expert_cache = cache;
    EXPECT_EQ(Model::load(path, o)->prefetch_layers(), layers) << cache;
  }
  ModelOptions o;
  o.expert_cache = "75%";
  o.tiered.prefetch_layers = 3;  // given: kept
  EXPECT_EQ(Model::load(path, o)->prefetch_layers(), 3);
}

// Once layers run, the depth follows the experts each layer had to read (three reads an
// expert): 1 when a layer's own reads fill the I/O threads, else 2 or 3.
TEST(ExpertStore, PrefetchDepthFollowsTheMisses) {
  EXPECT_EQ(prefetch_layers_for(5.9, 8), 1);  // uniform olmoe at 25%: 17.7 reads a layer
  EXPECT_EQ(prefetch_layers_for(3.9, 8), 1);  // at 50%
  EXPECT_EQ(prefetch_layers_for(2.7, 8), 1);  // 8.1 reads: the layer fills the threads
  EXPECT_EQ(prefetch_layers_for(2.6, 8), 2);
  EXPECT_EQ(prefetch_layers_for(2.2, 8), 2);
  EXPECT_EQ(prefetch_layers_for(1.9, 8), 3);  // uniform olmoe at 75%
  EXPECT_EQ(prefetch_layers_for(1.7, 8), 3);  // skewed olmoe at 50%
  EXPECT_EQ(prefetch_layers_for(0.3, 8), 3);
  EXPECT_EQ(prefetch_layers_for(0.0, 8), 3);  // nothing to read: looking ahead costs nothing
  EXPECT_EQ(prefetch_layers_for(1.7, 32), 3);
  const std::string path = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  const std::vector<int32_t> prompt = {1, 450, 7458, 411, 23226, 338};
  for (const std::string cache : {"25%", "100%"}) {
    ModelOptions o;
    o.expert_cache = cache;
    auto m = Model::load(path, o);
    ASSERT_TRUE(m->prefetch_layers_follow_misses());
    ASSERT_EQ(m->prefetch_layers(),
              auto_prefetch_layers(cache == "25%" ? 1 : 4, 4));  // by size until a layer ran
    run(*m, prompt, 24);
    const ExpertStoreStats st = m->tiered_experts()->stats();
    if (cache == "100%") {
      // Only the first uses of each expert read: the average decays towards none.
      EXPECT_LT(m->tiered_experts()->reads_per_layer(), 0.5);
      EXPECT_EQ(m->prefetch_layers(), 3);
    } else {
      // Two slots a layer for top-2 routing over 8 experts: most layers read one or two.
      const double per_layer = static_cast<double>(st.misses + st.prefetch_used) /
                               static_cast<double>(st.hits + st.misses) * m->hparams().n_expert_used;
      const double avg = m->tiered_experts()->reads_per_layer();
      EXPECT_GT(per_layer, 0.5);
      EXPECT_GT(avg, 0.25 * per_layer);
      EXPECT_LT(avg, 2.0);  // a layer reads at most its top-2
      EXPECT_EQ(m->prefetch_layers(), prefetch_layers_for(avg, m->tiered_experts()->io_threads()));
    }
  }
  ModelOptions fixed;
  fixed.expert_cache = "100%";
  fixed.tiered.prefetch_layers = 1;
  auto m = Model::load(path, fixed);
  EXPECT_FALSE(m->prefetch_layers_follow_misses());
  run(*m, prompt, 24);
  EXPECT_EQ(m->prefetch_layers(), 1);
}

// The miss latency prefetching hides: a prefetched expert whose load finished before its
// layer came counts its whole load time as hidden; a demand miss counts nothing.
TEST(ExpertStore, CountsTheLoadLatencyPrefetchHid) {
  ModelOptions o;
  o.expert_cache = "100%";
  auto m = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf", o);
  TieredExpertStore& st = *m->tiered_experts();
  std::vector<std::vector<int32_t>> groups;
  auto use = [&](int layer, int expert) {
    st.begin_step();
    st.plan_layer(layer, {expert}, {1}, groups);
    ASSERT_FALSE(st.acquire(layer, expert).empty());
    st.release(layer, expert);
  };

  st.prefetch(0, {3});
  for (int i = 0; i < 500 && st.stats().loads < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(st.stats().loads, 1);
  use(0, 3);
  EXPECT_EQ(st.stats().prefetch_used, 1);
  EXPECT_GT(st.stats().prefetch_latency_seconds, 0.0);
  EXPECT_EQ(st.stats().prefetch_wait_seconds, 0.0);  // ready before it was needed: all hidden
  const double latency = st.stats().prefetch_latency_seconds;

  use(1, 5);  // a demand miss: waits, but hides nothing
  EXPECT_EQ(st.stats().misses, 1);
  EXPECT_EQ(st.stats().prefetch_latency_seconds, latency);
  use(0, 3);  // a plain hit afterwards: the prefetch's latency counts once
  EXPECT_EQ(st.stats().prefetch_latency_seconds, latency);

  st.prefetch(2, {1});  // needed at once: the wait is part of the latency, never more
  use(2, 1);
  EXPECT_EQ(st.stats().prefetch_used, 2);
  EXPECT_GT(st.stats().prefetch_latency_seconds, latency);
  EXPECT_LE(st.stats().prefetch_wait_seconds, st.stats().prefetch_latency_seconds - latency + 1e-9);

  // A wrong guess stays wrong: the layer it was for did not use it, so a later step's use
  // of the expert is a hit, not a prefetch that paid off.
  st.prefetch(3, {6});
  for (int i = 0; i < 500 && st.stats().loads < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(st.stats().loads, 4);
  use(3, 2);
  use(3, 6);
  EXPECT_EQ(st.stats().prefetch_used, 2);
}

// A model of one MoE layer has no earlier layer to guess its experts from: the step
// prefetches them from the token embeddings, so that layer's loads start before its
// attention runs. Without that, nothing here would ever be prefetched. The logits stay
// the resident run's.
TEST(ExpertStore, TheFirstLayerPrefetchesFromTheEmbeddings) {
  SynthOptions o;
  o.shape = synth_preset("tiny").shape;
  o.shape.n_layer = 1;
  test::TempFile f;
  ThreadPool pool(2);
  write_synth_model(f.path(), o, pool);
  const std::vector<int32_t> prompt = {3, 17, 99, 5};
  const auto want = run(*Model::load(f.path()), prompt, 4);
  for (bool prefetch : {true, false}) {
    ModelOptions mo;
    mo.expert_cache = "100%";
    mo.tiered.predictive_prefetch = prefetch;
    auto m = Model::load(f.path(), mo);
    EXPECT_EQ(run(*m, prompt, 4), want) << "prefetch " << prefetch;
    const ExpertStoreStats st = m->tiered_experts()->stats();
    if (prefetch) {
      EXPECT_GT(st.prefetch_issued, 0);
      EXPECT_GT(st.prefetch_used, 0);  // the embeddings' guess is right at least once
    } else {
      EXPECT_EQ(st.prefetch_issued, 0);
    }
  }
}

// Without prefetch the store is the replay's eviction policy run live: decoding the
// bundled model's validation text one token per step, it loads exactly the experts that
// `analyze`'s offline replay of the same run's trace misses, for each policy, and never
// fewer than Belady's MIN. This is what lets the replay's miss rates speak for the store.
TEST(ExpertStore, LoadsWhatTheReplayOfItsOwnTraceMisses) {
  const std::string model = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  std::ifstream in(test::shared_path("models/tiny-mixtral/valid.txt"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.resize(std::min<size_t>(text.size(), 1500));
  // Steps of 16 tokens need more than the 4 slots a layer has: the experts beyond them load
  // one at a time, and the policy must see their real token counts there too.
  for (const auto& [policy, batch] : std::vector<std::pair<std::string, size_t>>{
           {"eb-lfu", 1}, {"lru", 1}, {"lfu-decay", 1}, {"expert-buffering", 1}, {"eb-lfu", 16}, {"lfu-decay", 16}}) {
    SCOPED_TRACE(policy + " in steps of " + std::to_string(batch));
    ModelOptions o;
    o.expert_cache = "50%";  // 4 of 8 experts per layer
    o.tiered.policy = policy;
    o.tiered.predictive_prefetch = false;
    auto m = Model::load(model, o);
    const auto tokens = m->tokenizer().encode(text, true, false);
    ASSERT_GT(tokens.size(), 200u);
    test::TempFile file(".sytrace");
    TraceWriter trace(file.path(), TraceInfo::from_hparams(m->hparams(), false), static_cast<int64_t>(batch));
    ThreadPool pool(2);
    Session s(*m, pool, static_cast<int64_t>(tokens.size()) + 1);
    s.forward().set_routing_observer(&trace);
    const ExpertStoreStats before = m->tiered_experts()->stats();
    for (size_t i = 0; i < tokens.size(); i += batch) {
      s.eval(std::vector<int32_t>(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + batch)));
    }
    trace.close();
    const ExpertCacheUse use = expert_cache_use(before, m->tiered_experts()->stats());

    const Trace replayed = read_trace(file.path());
    const CacheSimResult sim = simulate_cache(replayed, policy, CacheScope::PerLayer, 4);
    EXPECT_EQ(use.uses, static_cast<double>(sim.requests)) << policy;
    EXPECT_EQ(use.loads, static_cast<double>(sim.misses)) << policy;
    EXPECT_EQ(use.misses, use.loads) << policy << ": without prefetch every load is a demand miss";
    EXPECT_DOUBLE_EQ(use.load_rate(), sim.miss_rate()) << policy;
    EXPECT_GE(use.loads, static_cast<double>(simulate_cache(replayed, "belady", CacheScope::PerLayer, 4).misses));
  }
}

// A read that fails (here: the file cut short under the store) fails its step, and the
// next use of that expert reads it again once the file is whole, instead of failing for
// good. Loads the caller had to wait for on its own thread count as waiting too.
TEST(ExpertStore, AFailedReadIsReadAgainLater) {
  const std::string original = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  const std::vector<uint8_t> bytes = test::read_bytes(original);
  test::TempFile copy(".gguf");
  copy.write(bytes);
  ModelOptions o;
  o.expert_cache = "12.5%";  // one slot per layer
  o.tiered.predictive_prefetch = false;
  auto m = Model::load(copy.path(), o);
  TieredExpertStore& st = *m->tiered_experts();
  std::vector<std::vector<int32_t>> groups;

  // Two experts for one slot: the second loads on the caller's thread, after the first.
  st.begin_step();
  st.plan_layer(0, {0, 1}, {1, 1}, groups);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_FALSE(st.acquire(0, 0).empty());
  st.release(0, 0);
  const double waited = st.stats().wait_seconds;
  ASSERT_FALSE(st.acquire(0, 1).empty());
  st.release(0, 1);
  EXPECT_GT(st.stats().wait_seconds, waited) << "the synchronous load is a wait too";

  // Only the store reads the file here (by pread); nothing touches the mapping meanwhile.
  ASSERT_EQ(::truncate(copy.path().c_str(), 1 << 20), 0);
  st.begin_step();
  st.plan_layer(3, {7}, {1}, groups);
  EXPECT_THROW(st.acquire(3, 7), Error);
  st.release(3, 7);
  const int64_t loads = st.stats().loads;
  copy.write(bytes);
  st.begin_step();
  st.plan_layer(3, {7}, {1}, groups);
  EXPECT_FALSE(st.acquire(3, 7).empty());
  st.release(3, 7);
  EXPECT_EQ(st.stats().loads, loads + 1);
}

// A prefetch for a layer never evicts an expert it predicts for that layer: the victim is
// another one, even when the policy ranks the predicted expert lowest.
TEST(ExpertStore, PrefetchKeepsThePredictedResidentExperts) {
  ModelOptions o;
  o.expert_cache = "25%";  // two slots per layer of tiny-mixtral's 8 experts
  o.tiered.predictive_prefetch = false;
  auto m = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf", o);
  TieredExpertStore& st = *m->tiered_experts();
  std::vector<std::vector<int32_t>> groups;
  auto use = [&](int expert, int64_t tokens) {
    st.begin_step();
    st.plan_layer(0, {expert}, {tokens}, groups);
    ASSERT_FALSE(st.acquire(0, expert).empty());
    st.release(0, expert);
  };
  use(1, 1);  // the least used: the default policy's (lfu-decay) victim
  use(2, 8);
  st.begin_step();
  st.prefetch(0, {1, 5});  // 1 is resident and predicted again; 5 needs a slot
  for (int i = 0; i < 500 && st.stats().loads < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(st.stats().loads, 3);
  const int64_t misses = st.stats().misses;
  use(1, 1);
  use(5, 1);
  EXPECT_EQ(st.stats().misses, misses) << "the prefetch evicted an expert it predicted";
  use(2, 1);
  EXPECT_EQ(st.stats().misses, misses + 1);  // 2 was the one to go
}

// A step needing more experts than the layer has slots (a prompt) runs the rest one at a
// time; with the default policy the busiest of them stay for the next step. Two slots;
// experts 0..3 get 1, 5, 1, 5 tokens: 0 and 1 load first, then 2 evicts 0 (the lower
// score) and 3 evicts 2, leaving 1 and 3, so a step on those two hits. eb-lfu's
// fallback (the last loaded: 1, then 2) leaves 0 and 3, and the same step misses once.
TEST(ExpertStore, ABatchCoveringTheCacheLeavesItsBusiestExperts) {
  for (const auto& [policy, want_misses] : std::vector<std::pair<std::string, int64_t>>{{kDefaultCachePolicy, 0}, {"eb-lfu", 1}}) {
    ModelOptions o;
    o.expert_cache = "25%";  // two slots per layer of tiny-mixtral's 8 experts
    o.tiered.policy = policy;
    o.tiered.predictive_prefetch = false;
    auto m = Model::load(std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf", o);
    TieredExpertStore& st = *m->tiered_experts();
    std::vector<std::vector<int32_t>> groups;
    auto run_step = [&](const std::vector<int32_t>& experts, const std::vector<int64_t>& tokens) {
      st.begin_step();
      st.plan_layer(0, experts, tokens, groups);
      for (const auto& g : groups) {
        for (int32_t e : g) ASSERT_FALSE(st.acquire(0, e).empty());
        for (int32_t e : g) st.release(0, e);
      }
    };
    run_step({0, 1, 2, 3}, {1, 5, 1, 5});
    const int64_t misses = st.stats().misses;
    run_step({1, 3}, {1, 1});
    EXPECT_EQ(st.stats().misses - misses, want_misses) << policy;
  }
}

// A profile pins, in each layer, the count that its replay chose of its hottest experts,
// and their first uses hit. A profile for another shape, or a file that is not a trace, is
// refused.
TEST(ExpertStore, PinsTheHottestExpertsOfAProfile) {
  const std::string model = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  Trace profile = test::random_trace(5, 4, 8, 2, 300, 1);  // tiny-mixtral's shape
  profile.info.model_name = TraceInfo::from_hparams(Model::load(model)->hparams(), false).model_name;
  test::TempFile file(".sytrace");
  write_trace(file.path(), profile);
  ModelOptions o;
  o.expert_cache = "50%";  // 4 slots per layer
  o.tiered.profile = file.path();
  auto m = Model::load(model, o);
  TieredExpertStore& st = *m->tiered_experts();
  const auto pins = choose_pinned_experts(profile, 4, 1, kDefaultCachePolicy, kDefaultLfuDecay);
  std::vector<int> want;
  for (const auto& p : pins) want.push_back(static_cast<int>(p.size()));
  EXPECT_EQ(st.profile_pins(), want);
  ASSERT_GT(std::accumulate(want.begin(), want.end(), 0), 0) << "a skewed profile pins something";
  std::vector<std::vector<int32_t>> groups;
  int pinned = 0;
  for (int layer = 0; layer < 4; ++layer) {
    for (const int32_t e : pins[layer]) {
      st.begin_step();
      st.plan_layer(layer, {e}, {1}, groups);
      st.release(layer, e);
      ++pinned;
    }
  }
  EXPECT_EQ(st.stats().hits, pinned);
  EXPECT_EQ(st.stats().misses, 0);

  Trace other = test::random_trace(1, 4, 16, 2, 8, 4);
  test::TempFile wrong_shape(".sytrace");
  write_trace(wrong_shape.path(), other);
  o.tiered.profile = wrong_shape.path();
  try {
    Model::load(model, o);
    ADD_FAILURE() << "a profile for 16 experts was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--expert-profile trace is for a model with 4 MoE layers of 16 experts"),
              std::string::npos) << e.what();
  }
  // Another model of the same shape, or another top-k: its hot experts are not this one's.
  for (const auto& [name, top_k] : std::vector<std::pair<std::string, int>>{{"another-model", 2}, {profile.info.model_name, 3}}) {
    Trace foreign = test::random_trace(5, 4, 8, top_k, 300, 1);
    foreign.info.model_name = name;
    test::TempFile foreign_file(".sytrace");
    write_trace(foreign_file.path(), foreign);
    o.tiered.profile = foreign_file.path();
    try {
      Model::load(model, o);
      ADD_FAILURE() << "a profile of " << name << " top-" << top_k << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--expert-profile trace was recorded with the model '" + name + "' (top-" +
                                           std::to_string(top_k) + ")"),
                std::string::npos)
          << e.what();
    }
  }
  test::TempFile junk(".sytrace");
  std::ofstream(junk.path()) << "not a trace\n";
  o.tiered.profile = junk.path();
  try {
    Model::load(model, o);
    ADD_FAILURE() << "a file that is not a trace was accepted as a profile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an expert trace"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sy
