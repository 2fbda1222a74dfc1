// Iteration-level scheduling over a paged KV cache. Each step's batch holds one decode
// token of every running sequence plus prefill chunks of sequences still reading their
// prompt, up to a token budget, side by side without padding. The scheduler owns every
// sequence from admission to retirement and the KV blocks they hold:
//  - admission: a waiting sequence joins the batch when a slot is free and the cache can
//    hold all the tokens it knows (its prompt, plus what it generated before a
//    preemption), with a small watermark of blocks kept free for running sequences to
//    grow into; otherwise it waits (FIFO, so a long prompt cannot be starved);
//  - growth: before a step every running sequence gets room for its next position; when
//    the pool is empty the most recently admitted sequence is preempted: its blocks are
//    freed and it goes back to the queue, to be recomputed from its tokens later (the
//    oldest sequence always progresses, so nothing can deadlock);
//  - retirement: a finished or cancelled sequence leaves at once and frees its blocks;
//  - prefix reuse: every full block a sequence has computed goes into a prefix index
//    (runtime/prefix_index.h), and so does its partly filled last block when it leaves;
//    they stay cached until the pool needs them. A sequence joining the batch attaches
//    the full blocks of the longest prefix it shares with any sequence, running or
//    finished (a common system prompt, the next turn of a conversation), and copies the
//    rows of the next block that shares the most tokens with it (cached, or a running
//    sequence's), instead of computing them. K/V of a token depend only on the tokens
//    before it, so both are exact.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "model/batch.h"
#include "runtime/kv_cache.h"
#include "runtime/prefix_index.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/token_logprobs.h"

namespace sy {

struct Sequence {
  Sequence(std::shared_ptr<Request> r, uint64_t order);

  std::shared_ptr<Request> req;
  uint64_t order;               // arrival order: lower is older and goes first
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;  // leading tokens whose K/V are in the cache (after this step)
  int64_t n_ready = 0;     // leading tokens whose K/V were written by earlier steps
  int64_t n_scored = 0;    // prompt positions whose logits went to prompt log-probabilities
  int slot = -1;           // KV cache sequence slot while running
  Sampler sampler;
  LogprobRow logprobs;          // the last sampled row's, when the request asks for them
  std::vector<int32_t> counts;  // per vocabulary id, for presence/frequency penalties
  std::vector<int32_t> seen;    // ids with a non-zero count
  Clock::time_point admitted{}, last_token{};
  int n_preempted = 0;
  bool done = false;
  int64_t n_indexed = 0;    // leading blocks of its table found in the prefix index
  uint64_t index_tail = 0;  // the serial of the last of them
  // A chain broken by a hash collision (serial 0) stays broken: nothing after it is indexed.
  bool index_chain_intact() const { return n_indexed == 0 || index_tail != 0; }

  int64_t n_generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  bool scores_prompt() const { return req->params().prompt_logprobs; }
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

struct SchedulerConfig {
  int max_running = 8;             // KV slots: sequences in the running batch at once
  int64_t max_batch_tokens = 512;  // tokens per step, decode and prefill together
  int64_t watermark_blocks = -1;   // free blocks admission leaves for growth (-1: 1%, >= 1)
  bool prefix_reuse = false;       // runtime/prefix_index.h
};

// One step's work: the batch, the sequences that sample a token from it (each with its
// row of the logits), and the prompt positions whose logits score the next prompt token
// (requests that ask for the prompt's log-probabilities).
struct StepPlan {
  struct PromptRow {
    Sequence* seq;
    int64_t pos;         // the logits of position pos score prompt token pos + 1
    int64_t logits_row;
  };
  Batch batch;
  std::vector<Sequence*> rows;
  std::vector<int64_t> row_logits;  // rows[i]'s row of the logits
  std::vector<PromptRow> prompt_rows;
  int64_t n_logits = 0;
  int64_t n_decode = 0, n_prefill = 0;
  int64_t n_admitted = 0, n_preempted = 0;
  int64_t n_reused = 0;  // prompt tokens attached or copied instead of computed

  void clear();
};

class Scheduler {
 public:
  // max_running must not exceed cache.n_seq(); max_batch_tokens must be >= max_running.
  Scheduler(SchedulerConfig cfg, KvCache& cache);

  void enqueue(std::unique_ptr<Sequence> s);
  // Plans the next step and advances n_computed of every sequence in it (the step is
  // assumed to run; on failure the caller retires them). False when there is no work.
  bool schedule(StepPlan& plan);
  // Removes a sequence (running or waiting) for which pred(seq) holds, freeing its slot
  // and blocks, and hands it to sink(std::unique_ptr<Sequence>). `written`: the steps
  // planned so far ran, so the removed sequences' computed K/V may be kept for reuse
  // (false after a failed step, whose positions are half written).
  template <class Pred, class Sink>
  void remove_if(Pred pred, Sink sink, bool written = true);

  size_t n_waiting() const { return waiting_.size(); }
  template <class F>
  void for_each_waiting(F f) const {
    for (const auto& s : waiting_) f(*s);
  }
  size_t n_running() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  const KvCache& cache() const { return cache_; }
  int64_t preemptions() const { return preemptions_; }

 private:
  void preempt(size_t running_index);
  bool try_admit(int64_t& budget, StepPlan& plan);
  void add_chunk(Sequence& s, int64_t n, StepPlan& plan);
  void index_blocks(Sequence& s);
  void index_partial_block(Sequence& s);  // when s leaves
  // The running sequence sharing the longest prefix of s whose K/V are written (`ready`
  // tokens), and the longest that any running sequence will have once this step runs (`soon`).
  const Sequence* longest_prefix(const Sequence& s, int64_t& ready, int64_t& soon) const;
  void release(Sequence& s, bool written);

  SchedulerConfig cfg_;
  KvCache& cache_;
  std::vector<std::unique_ptr<Sequence>> running_;  // sorted by order
  std::deque<std::unique_ptr<Sequence>> waiting_;   // sorted by order
  std::vector<int> free_slots_;
  int64_t preemptions_ = 0;
  std::unique_ptr<PrefixIndex> index_;  // with prefix reuse only
  PrefixIndex::Match match_;            // scratch
};

template <class Pred, class Sink>
void Scheduler::remove_if(Pred pred, Sink sink, bool written) {
  for (size_t i = 0; i < running_.size();) {
    if (pred(*running_[i])) {
      auto s = std::move(running_[i]);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      release(*s, written);
      sink(std::move(s));
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < waiting_.size();) {
    if (pred(*waiting_[i])) {
      auto s = std::move(waiting_[i]);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      sink(std::move(s));
    } else {
      ++i;
    }
  }
}

}  // namespace sy
