// The scheduler without a model: ragged batches, chunked prefill, admission control,
// preemption and block accounting over a small paged KV cache.
#include <gtest/gtest.h>

#include <memory>

#include "base/error.h"
#include "runtime/scheduler.h"

namespace sy {
namespace {

std::unique_ptr<Sequence> seq(int n_prompt, uint64_t order, int first_token = 10) {
  std::vector<int32_t> p(static_cast<size_t>(n_prompt));
  for (int i = 0; i < n_prompt; ++i) p[i] = first_token + i;
  GenerationParams g;
  g.max_tokens = 100;
  return std::make_unique<Sequence>(std::make_shared<Request>(p, g), order);
}

// What the engine does after a step: every sequence with a logits row gets a token.
void sample_all(StepPlan& plan) {
  for (Sequence* s : plan.rows) s->tokens.push_back(7);
}

// The prompt step, then one decode step, whose start indexes the prompt's full blocks.
void prompt_then_decode(Scheduler& s, StepPlan& plan) {
  ASSERT_TRUE(s.schedule(plan));
  sample_all(plan);
  ASSERT_TRUE(s.schedule(plan));
}

void end_all(Scheduler& s) {
  s.remove_if([](const Sequence&) { return true; }, [](std::unique_ptr<Sequence>) {});
}

KvCache small_cache(int64_t n_blocks, int64_t block_size, int n_seq) {
  return KvCache(1, 1, 1, n_blocks, block_size, n_seq);
}

// What the forward pass would have written at positions [0, n) of a sequence: values
// that name the layer, the position and the sequence's first token.
void write_rows(KvCache& cache, const Sequence& q, int64_t n) {
  for (int l = 0; l < 2; ++l) {
    for (int64_t p = 0; p < n; ++p) {
      cache.k_row(l, q.slot, p)[0] = 1000.0f * l + static_cast<float>(p) + 0.25f * q.tokens[0];
      cache.v_row(l, q.slot, p)[0] = -cache.k_row(l, q.slot, p)[0];
    }
  }
}

void expect_rows(KvCache& cache, int slot, int64_t first, int64_t end, int32_t first_token) {
  for (int l = 0; l < 2; ++l) {
    for (int64_t p = first; p < end; ++p) {
      const float want = 1000.0f * l + static_cast<float>(p) + 0.25f * first_token;
      EXPECT_EQ(cache.k_row(l, slot, p)[0], want) << "layer " << l << " position " << p;
      EXPECT_EQ(cache.v_row(l, slot, p)[0], -want) << "layer " << l << " position " << p;
    }
  }
}

// A next turn of n tokens: the first `shared` of seq()'s prompt (10, 11, ...), then the
// token sample_all() gave (7) if `sampled`, then `fill`.
std::unique_ptr<Sequence> turn(int n, uint64_t order, int shared, bool sampled, int32_t fill = 99) {
  auto q = seq(n, order);
  for (int i = shared; i < n; ++i) q->tokens[i] = sampled && i == shared ? 7 : fill;
  return q;
}

// Enqueues q and plans the next step.
void admit(Scheduler& s, std::unique_ptr<Sequence> q, StepPlan& plan) {
  s.enqueue(std::move(q));
  ASSERT_TRUE(s.schedule(plan));
}

// One finished sequence of n_prompt tokens (first token first_token) that sampled one token
// and wrote its K/V for n_prompt + 1 positions (the prompt step and one decode step).
// Returns the blocks it held.
std::vector<int32_t> finish_one(Scheduler& s, KvCache& cache, int n_prompt, uint64_t order, int first_token = 10) {
  s.enqueue(seq(n_prompt, order, first_token));
  StepPlan plan;
  prompt_then_decode(s, plan);
  const Sequence& q = *plan.rows[0];
  write_rows(cache, q, n_prompt + 1);
  std::vector<int32_t> blocks;
  for (int64_t i = 0; i < cache.blocks_needed(n_prompt + 1); ++i) blocks.push_back(cache.block(q.slot, i));
  end_all(s);
  return blocks;
}

TEST(ServerScheduler, RaggedBatchWithoutPadding) {
  KvCache cache = small_cache(16, 4, 4);
  Scheduler s({4, 100, 0}, cache);
  s.enqueue(seq(5, 0));
  s.enqueue(seq(3, 1));
  s.enqueue(seq(7, 2));
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  ASSERT_EQ(plan.batch.size(), 15);  // 5 + 3 + 7, side by side
  ASSERT_EQ(plan.rows.size(), 3u);
  // Each sequence's tokens are consecutive, at positions 0..n-1, logits only at its last.
  const int lens[] = {5, 3, 7};
  int64_t t = 0;
  for (int i = 0; i < 3; ++i) {
    const int32_t slot = plan.batch.seq[t];
    EXPECT_EQ(plan.rows[i]->slot, slot);
    for (int p = 0; p < lens[i]; ++p, ++t) {
      EXPECT_EQ(plan.batch.seq[t], slot);
      EXPECT_EQ(plan.batch.positions[t], p);
      EXPECT_EQ(plan.batch.want_logits[t], p == lens[i] - 1 ? 1 : 0);
    }
  }
  sample_all(plan);
  // Next step: one decode token each.
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.batch.size(), 3);
  EXPECT_EQ(plan.n_decode, 3);
  EXPECT_EQ(plan.batch.positions[0], 5);
  EXPECT_EQ(plan.batch.positions[1], 3);
  EXPECT_EQ(plan.batch.positions[2], 7);
}

TEST(ServerScheduler, PromptScoringRowsAcrossChunksAndAfterAPrefixCopy) {
  KvCache cache = small_cache(16, 4, 2);
  Scheduler s({2, 4, -1, true}, cache);  // prefix reuse on
  s.enqueue(seq(10, 0));
  StepPlan plan;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.schedule(plan));
    EXPECT_TRUE(plan.prompt_rows.empty());
  }
  sample_all(plan);
  // The same prompt, scored: nothing is copied from the running one (a copy has no logits),
  // and positions 0..8 each give one logits row, in batch order, beside the sampling rows.
  auto scored = seq(10, 1);
  GenerationParams g;
  g.max_tokens = 0;
  g.top_logprobs = 0;
  g.prompt_logprobs = true;
  scored = std::make_unique<Sequence>(std::make_shared<Request>(scored->tokens, g), 1);
  s.enqueue(std::move(scored));
  std::vector<int64_t> positions;
  for (int step = 0; step < 6 && positions.size() < 9; ++step) {
    ASSERT_TRUE(s.schedule(plan));
    EXPECT_EQ(plan.n_reused, 0);
    int64_t logits_rows = 0;
    for (int64_t t = 0; t < plan.batch.size(); ++t) logits_rows += plan.batch.want_logits[t];
    EXPECT_EQ(logits_rows, static_cast<int64_t>(plan.rows.size() + plan.prompt_rows.size()));
    EXPECT_EQ(plan.n_logits, logits_rows);
    for (const auto& r : plan.prompt_rows) {
      positions.push_back(r.pos);
      // Its logits row is the want_logits row of its token.
      int64_t row = 0, t = 0;
      for (; t < plan.batch.size(); ++t) {
        if (plan.batch.seq[t] == r.seq->slot && plan.batch.positions[t] == r.pos) break;
        row += plan.batch.want_logits[t];
      }
      EXPECT_EQ(r.logits_row, row);
    }
    for (size_t i = 0; i < plan.rows.size(); ++i) EXPECT_LT(plan.row_logits[i], plan.n_logits);
    for (Sequence* q : plan.rows) q->tokens.push_back(7);
  }
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(ServerScheduler, ChunkedPrefillUnderTokenBudget) {
  KvCache cache = small_cache(16, 4, 2);
  Scheduler s({2, 4, 0}, cache);
  s.enqueue(seq(10, 0));
  StepPlan plan;
  std::vector<int64_t> chunks;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.schedule(plan));
    chunks.push_back(plan.batch.size());
    EXPECT_EQ(plan.rows.size(), i == 2 ? 1u : 0u) << "logits only when the prompt is complete";
    EXPECT_EQ(plan.batch.positions[0], 4 * i);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{4, 4, 2}));
  sample_all(plan);
  // A newcomer shares the step with the decode token, which goes first.
  s.enqueue(seq(6, 1));
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_decode, 1);
  EXPECT_EQ(plan.n_prefill, 3);
  EXPECT_EQ(plan.batch.positions[0], 10);
}

TEST(ServerScheduler, AdmissionWaitsForBlocksAndRetirementFreesThem) {
  KvCache cache = small_cache(4, 4, 4);  // 16 positions in all
  Scheduler s({4, 100, 1}, cache);
  s.enqueue(seq(10, 0));  // 3 blocks
  s.enqueue(seq(6, 1));   // 2 blocks: does not fit next to the first
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(s.n_running(), 1u);
  EXPECT_EQ(s.n_waiting(), 1u);
  EXPECT_EQ(cache.free_blocks(), 1);
  sample_all(plan);
  // Finishing the first frees its blocks at once; the second gets in at the next step.
  std::vector<std::unique_ptr<Sequence>> out;
  s.remove_if([](const Sequence& q) { return q.order == 0; },
              [&](std::unique_ptr<Sequence> q) { out.push_back(std::move(q)); });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->slot, -1);
  EXPECT_EQ(cache.free_blocks(), 4);
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(s.n_running(), 1u);
  EXPECT_EQ(s.n_waiting(), 0u);
  EXPECT_EQ(plan.batch.size(), 6);
  EXPECT_EQ(cache.free_blocks(), 2);
}

TEST(ServerScheduler, PreemptsTheNewestWhenThePoolRunsOut) {
  KvCache cache = small_cache(4, 4, 2);
  Scheduler s({2, 100, 0}, cache);
  s.enqueue(seq(7, 0));
  s.enqueue(seq(7, 1, 50));
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  ASSERT_EQ(s.n_running(), 2u);
  EXPECT_EQ(cache.free_blocks(), 0);
  sample_all(plan);  // both now hold 8 tokens: position 7 still fits their 2 blocks
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_decode, 2);
  sample_all(plan);  // 9 tokens: position 8 needs a third block each
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_preempted, 1);
  EXPECT_EQ(s.preemptions(), 1);
  ASSERT_EQ(s.n_running(), 1u);
  ASSERT_EQ(s.n_waiting(), 1u);
  EXPECT_EQ(plan.batch.size(), 1);
  EXPECT_EQ(plan.rows[0]->order, 0u) << "the oldest keeps running";
  EXPECT_EQ(plan.batch.positions[0], 8);
  sample_all(plan);
  // When the oldest ends, the preempted one comes back and recomputes all it had.
  s.remove_if([](const Sequence& q) { return q.order == 0; }, [](std::unique_ptr<Sequence>) {});
  ASSERT_TRUE(s.schedule(plan));
  ASSERT_EQ(plan.rows.size(), 1u);
  EXPECT_EQ(plan.rows[0]->order, 1u);
  EXPECT_EQ(plan.batch.size(), 9);  // 7 prompt + 2 generated
  EXPECT_EQ(plan.batch.tokens[0], 50);
  EXPECT_EQ(plan.batch.tokens[8], 7);
  EXPECT_EQ(plan.rows[0]->n_preempted, 1);
}

// A preempted sequence may find its own blocks in the prefix index again. That is not a
// prefix shared with an earlier request: /metrics' reuse and the queue time (from arrival to
// the first admission) stay those of its first admission.
TEST(ServerScheduler, ReadmissionAfterPreemptionIsNotCountedAsReuse) {
  KvCache cache = small_cache(6, 4, 2);
  Scheduler s({2, 100, 0, true}, cache);
  s.enqueue(seq(7, 0));
  s.enqueue(seq(7, 1, 50));
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  Clock::time_point first_admission{};
  for (const Sequence* q : plan.rows) {
    if (q->order == 1) first_admission = q->admitted;
  }
  ASSERT_NE(first_admission, Clock::time_point{});
  for (int step = 0; step < 8 && plan.n_preempted == 0; ++step) {
    sample_all(plan);
    ASSERT_TRUE(s.schedule(plan));
  }
  ASSERT_EQ(plan.n_preempted, 1);
  s.remove_if([](const Sequence& q) { return q.order == 0; }, [](std::unique_ptr<Sequence>) {});
  ASSERT_TRUE(s.schedule(plan));
  ASSERT_EQ(plan.rows.size(), 1u);
  EXPECT_EQ(plan.rows[0]->order, 1u);
  EXPECT_EQ(plan.rows[0]->n_preempted, 1);
  EXPECT_LT(plan.batch.size(), static_cast<int64_t>(plan.rows[0]->tokens.size())) << "it found its blocks again";
  EXPECT_EQ(plan.n_reused, 0);
  EXPECT_EQ(plan.rows[0]->admitted, first_admission);
}

TEST(ServerScheduler, CancelledWaitingAndRunningLeave) {
  KvCache cache = small_cache(8, 4, 1);
  Scheduler s({1, 100, 0}, cache);
  s.enqueue(seq(4, 0));
  s.enqueue(seq(4, 1));
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(s.n_running(), 1u);  // one slot
  EXPECT_EQ(s.n_waiting(), 1u);
  int removed = 0;
  s.remove_if([](const Sequence&) { return true; }, [&](std::unique_ptr<Sequence>) { removed++; });
  EXPECT_EQ(removed, 2);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(cache.free_blocks(), 8);
  EXPECT_FALSE(s.schedule(plan));
}

TEST(ServerScheduler, SharedPrefixIsCopiedNotRecomputed) {
  KvCache cache(2, 3, 2, 16, 4, 2);  // 2 layers, k_dim 3, v_dim 2
  SchedulerConfig cfg{2, 100, 0, true};
  Scheduler s(cfg, cache);
  s.enqueue(seq(9, 0));
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  // What the forward pass would have written for the first sequence.
  const int src = plan.rows[0]->slot;
  for (int l = 0; l < 2; ++l) {
    for (int p = 0; p < 9; ++p) {
      for (int i = 0; i < 3; ++i) cache.k_row(l, src, p)[i] = 100.0f * l + p + 0.1f * i;
      for (int i = 0; i < 2; ++i) cache.v_row(l, src, p)[i] = -100.0f * l - p - 0.1f * i;
    }
  }
  sample_all(plan);
  // Same first 6 tokens, then different ones.
  auto b = seq(8, 1);
  for (int i = 6; i < 8; ++i) b->tokens[i] = 99;
  s.enqueue(std::move(b));
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 6);
  EXPECT_EQ(plan.batch.size(), 1 + 2);  // the first's decode token, the second's last two prompt tokens
  EXPECT_EQ(plan.batch.positions[1], 6);
  const int dst = plan.rows[1]->slot;
  for (int l = 0; l < 2; ++l) {
    for (int p = 0; p < 6; ++p) {
      EXPECT_EQ(cache.k_row(l, dst, p)[2], 100.0f * l + p + 0.2f);
      EXPECT_EQ(cache.v_row(l, dst, p)[1], -100.0f * l - p - 0.1f);
    }
  }
  // A prompt that is all prefix still computes its last token.
  s.remove_if([](const Sequence& q) { return q.order == 1; }, [](std::unique_ptr<Sequence>) {});
  s.enqueue(seq(9, 2));
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 8);
}

TEST(ServerScheduler, IdenticalPromptsArrivingTogetherAreComputedOnce) {
  KvCache cache(1, 2, 2, 32, 4, 4);
  Scheduler s({4, 100, 0, true}, cache);
  for (uint64_t i = 0; i < 3; ++i) s.enqueue(seq(20, i));  // e.g. n = 3 choices of one call
  StepPlan plan;
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.batch.size(), 20) << "the others wait one step for the first one's K/V";
  EXPECT_EQ(s.n_waiting(), 2u);
  sample_all(plan);
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 2 * 19);
  EXPECT_EQ(plan.batch.size(), 1 + 1 + 1);  // a decode token and the two last prompt tokens
  EXPECT_EQ(plan.rows.size(), 3u);
}

// A finished request's full blocks stay cached: the next turn of the conversation attaches
// them (the same blocks, not copies) and computes only what follows.
TEST(ServerScheduler, FinishedPrefixIsAttachedNotRecomputed) {
  KvCache cache(1, 2, 2, 16, 4, 2);
  Scheduler s({2, 100, 0, true}, cache);
  s.enqueue(seq(10, 0));
  StepPlan plan;
  prompt_then_decode(s, plan);  // blocks 0 and 1 (positions 0..7) are indexed
  const int a = plan.rows[0]->slot;
  for (int p = 0; p < 10; ++p) cache.k_row(0, a, p)[1] = 0.5f + p;
  const int32_t first_blocks[] = {cache.block(a, 0), cache.block(a, 1)};
  end_all(s);
  EXPECT_EQ(cache.cached_blocks(), 3) << "two full blocks and the partly filled last one";
  EXPECT_EQ(cache.free_blocks(), 16) << "cached blocks count as free";

  auto b = seq(12, 1);
  for (int i = 8; i < 12; ++i) b->tokens[i] = 99;
  s.enqueue(std::move(b));
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 8) << "two full blocks; the third holds a different token";
  ASSERT_EQ(plan.batch.size(), 4);
  EXPECT_EQ(plan.batch.positions[0], 8);
  const int d = plan.rows[0]->slot;
  EXPECT_EQ(cache.block(d, 0), first_blocks[0]);
  EXPECT_EQ(cache.block(d, 1), first_blocks[1]);
  EXPECT_NE(cache.block(d, 2), first_blocks[0]);
  EXPECT_NE(cache.block(d, 2), first_blocks[1]);
  for (int p = 0; p < 8; ++p) EXPECT_EQ(cache.k_row(0, d, p)[1], 0.5f + p);
  EXPECT_EQ(cache.cached_blocks(), 1) << "the partly filled block, which nothing matched";
  EXPECT_EQ(cache.users(first_blocks[0]), 1);
}

// Cached blocks are reused only when no never-used block is left, deepest first, and an
// evicted block is no longer found.
TEST(ServerScheduler, CachedBlocksGiveWayWhenThePoolRunsOut) {
  KvCache cache(1, 2, 2, 6, 4, 1);
  Scheduler s({1, 100, 0, true}, cache);
  s.enqueue(seq(16, 0));
  StepPlan plan;
  prompt_then_decode(s, plan);  // 4 full blocks indexed; a 5th for position 16
  end_all(s);
  EXPECT_EQ(cache.cached_blocks(), 5) << "the 5th holds one position";

  s.enqueue(seq(20, 1, 500));  // other tokens: 5 blocks, 1 never used and 4 cached
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 0);
  EXPECT_EQ(cache.cached_blocks(), 1);
  end_all(s);

  s.enqueue(seq(18, 2));  // the first prompt again: only its first block is left
  ASSERT_TRUE(s.schedule(plan));
  EXPECT_EQ(plan.n_reused, 4);
  EXPECT_EQ(plan.batch.positions[0], 4);
}

// Two sequences that computed the same prompt side by side (prefix reuse was off for the
// second: it scores its prompt) index one copy; the second's blocks are freed, not cached.
TEST(ServerScheduler, EqualBlocksAreIndexedOnce) {
  KvCache cache(1, 2, 2, 16, 4, 2);
  Scheduler s({2, 100, 0, true}, cache);
  s.enqueue(seq(8, 0));
  GenerationParams g;
  g.max_tokens = 4;
  g.prompt_logprobs = true;
  s.enqueue(std::make_unique<Sequence>(std::make_shared<Request>(seq(8, 0)->tokens, g), 1));
  StepPlan plan;
  prompt_then_decode(s, plan);
  EXPECT_EQ(plan.batch.size(), 2) << "both computed their prompts in the first step";
  end_all(s);
  EXPECT_EQ(cache.cached_blocks(), 3) << "two full blocks and one of the two equal partial ones";
  EXPECT_EQ(cache.free_blocks(), 16);
}

TEST(ServerScheduler, SharedBlocksAreCountedPerUser) {
  KvCache cache(1, 2, 2, 8, 4, 2);
  ASSERT_TRUE(cache.reserve(0, 8));
  const std::vector<int32_t> prefix{cache.block(0, 0)};
  EXPECT_EQ(cache.attach_cost(prefix, 12), 2);
  ASSERT_TRUE(cache.attach(1, prefix, 12));
  EXPECT_EQ(cache.users(prefix[0]), 2);
  EXPECT_EQ(cache.free_blocks(), 8 - 2 - 2);
  cache.release(0);
  EXPECT_EQ(cache.users(prefix[0]), 1);
  EXPECT_EQ(cache.free_blocks(), 8 - 3);
  cache.retain(prefix[0]);
  cache.release(1);
  EXPECT_EQ(cache.cached_blocks(), 1);
  EXPECT_EQ(cache.free_blocks(), 8);
  // Attaching a cached block takes it out of the free count; a too-large request changes nothing.
  EXPECT_EQ(cache.attach_cost(prefix, 4), 1);
  EXPECT_FALSE(cache.attach(0, prefix, 40));
  EXPECT_EQ(cache.cached_blocks(), 1);
  ASSERT_TRUE(cache.attach(0, prefix, 4));
  EXPECT_EQ(cache.free_blocks(), 7);
}

// The next turn starts with all of the last one: its partly filled last block is copied.
TEST(ServerScheduler, FinishedPartialBlockIsCopied) {
  KvCache cache(2, 1, 1, 16, 4, 2);
  Scheduler s({2, 100, 0, true}, cache);
  finish_one(s, cache, 10, 0);  // tokens 10..19, 7: blocks of 4, 4 and 3 positions
  StepPlan plan;
  admit(s, turn(14, 1, 10, true), plan);
  EXPECT_EQ(plan.n_reused, 11) << "8 attached, 3 copied";
  ASSERT_EQ(plan.batch.size(), 3);
  EXPECT_EQ(plan.batch.positions[0], 11);
  const int d = plan.rows[0]->slot;
  expect_rows(cache, d, 0, 11, 10);
  EXPECT_EQ(cache.cached_blocks(), 1) << "the copied block stays cached";
  EXPECT_EQ(plan.rows[0]->req->cached_prompt_tokens(), 11);
}

// A turn that departs from the last one inside a full block copies the rows they share.
TEST(ServerScheduler, ADivergingPromptCopiesTheSharedRowsOfTheNextBlock) {
  KvCache cache(2, 1, 1, 16, 4, 2);
  Scheduler s({2, 100, 0, true}, cache);
  finish_one(s, cache, 12, 0);  // three full blocks and one position
  StepPlan plan;
  admit(s, turn(14, 1, 10, false), plan);
  EXPECT_EQ(plan.n_reused, 10) << "8 attached, 2 copied from the third block";
  EXPECT_EQ(plan.batch.positions[0], 10);
  expect_rows(cache, plan.rows[0]->slot, 0, 10, 10);
  // A prompt that shares only part of the first block copies that part.
  end_all(s);
  admit(s, turn(6, 2, 3, false, 98), plan);
  EXPECT_EQ(plan.n_reused, 3);
  expect_rows(cache, plan.rows[0]->slot, 0, 3, 10);
}

// The block copied from is held while the new sequence's blocks are taken, so the pool
// evicts other cached blocks before it, and it is still found afterwards.
TEST(ServerScheduler, TheCopiedBlockOutlivesATightPool) {
  KvCache cache(2, 1, 1, 6, 4, 1);
  Scheduler s({1, 100, 0, true}, cache);
  const int32_t tail = finish_one(s, cache, 6, 0)[1];  // 3 positions; cached first
  finish_one(s, cache, 8, 1, 500);                      // 3 more blocks, cached later
  EXPECT_EQ(cache.cached_blocks(), 5);
  StepPlan plan;
  admit(s, turn(14, 2, 6, true), plan);
  EXPECT_EQ(plan.n_reused, 7);
  const int d = plan.rows[0]->slot;
  expect_rows(cache, d, 0, 7, 10);
  EXPECT_NE(cache.block(d, 1), tail);
  EXPECT_TRUE(cache.retained(tail)) << "the least recently released block, but held while the pool was drawn on";
  EXPECT_EQ(cache.users(tail), 0);
}

// When holding the copied block would leave the pool one block short, the rows are
// computed instead: the head of the queue must never wait on an empty engine.
TEST(ServerScheduler, ACopyThatDoesNotFitIsComputed) {
  KvCache cache(2, 1, 1, 4, 4, 1);
  Scheduler s({1, 100, 0, true}, cache);
  finish_one(s, cache, 6, 0);
  StepPlan plan;
  admit(s, turn(16, 1, 6, true), plan);
  EXPECT_EQ(plan.n_reused, 4) << "the full block only";
  EXPECT_EQ(plan.batch.size(), 12);
}

// After a failed step the positions it was writing are half written: nothing of them is
// kept, while the blocks indexed before it stay.
TEST(ServerScheduler, AFailedStepKeepsNothingItWrote) {
  KvCache cache(1, 1, 1, 16, 4, 1);
  Scheduler s({1, 100, 0, true}, cache);
  s.enqueue(seq(10, 0));
  StepPlan plan;
  prompt_then_decode(s, plan);  // the decode step "fails"
  s.remove_if([](const Sequence&) { return true; }, [](std::unique_ptr<Sequence>) {}, /*written=*/false);
  EXPECT_EQ(cache.cached_blocks(), 2) << "the two full blocks of the prompt step";
}

TEST(ServerScheduler, AttachCopiesTheLeadingRowsOfABlock) {
  KvCache cache(2, 1, 1, 8, 4, 2);
  ASSERT_TRUE(cache.reserve(0, 8));
  for (int l = 0; l < 2; ++l) {
    for (int p = 0; p < 8; ++p) cache.k_row(l, 0, p)[0] = 10.0f * l + p;
  }
  const KvRows copy{cache.block(0, 1), 3};
  EXPECT_EQ(cache.attach_cost({cache.block(0, 0)}, 10, copy), 2) << "a block in use costs nothing to hold";
  ASSERT_TRUE(cache.attach(1, {cache.block(0, 0)}, 10, copy));
  EXPECT_NE(cache.block(1, 1), cache.block(0, 1));
  for (int l = 0; l < 2; ++l) {
    for (int p = 0; p < 7; ++p) EXPECT_EQ(cache.k_row(l, 1, p)[0], 10.0f * l + p);
  }
  cache.release(1);
  EXPECT_THROW(cache.attach(1, {}, 2, KvRows{cache.block(0, 1), 3}), Error) << "rows past the sequence";
  EXPECT_THROW(cache.attach(1, {}, 8, KvRows{cache.block(0, 1), 5}), Error) << "more rows than a block";
  EXPECT_THROW(cache.attach(1, {}, 8, KvRows{99, 1}), Error) << "no such block";
}

}  // namespace
}  // namespace sy
