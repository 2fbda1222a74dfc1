#include "runtime/scheduler.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace sy {

Sequence::Sequence(std::shared_ptr<Request> r, uint64_t ord)
    : req(std::move(r)), order(ord), sampler(req->params().sampling) {
  const auto& p = req->prompt();
  tokens.reserve(p.size() + static_cast<size_t>(std::max<int64_t>(0, req->params().max_tokens)));
  tokens.assign(p.begin(), p.end());
  n_prompt = static_cast<int64_t>(p.size());
  for (int32_t t : p) sampler.accept(t);
}

void StepPlan::clear() {
  batch.clear();
  rows.clear();
  row_logits.clear();
  prompt_rows.clear();
  n_logits = 0;
  n_decode = n_prefill = n_admitted = n_preempted = n_reused = 0;
}

Scheduler::Scheduler(SchedulerConfig cfg, KvCache& cache) : cfg_(cfg), cache_(cache) {
  if (cfg_.max_running < 1 || cfg_.max_running > cache.n_seq()) {
    throw Error("scheduler: max_running must be in 1.." + std::to_string(cache.n_seq()));
  }
  if (cfg_.max_batch_tokens < cfg_.max_running) {
    throw Error("scheduler: the batch token budget (" + std::to_string(cfg_.max_batch_tokens) +
                ") must be at least the number of parallel sequences (" + std::to_string(cfg_.max_running) +
                ")");
  }
  if (cfg_.watermark_blocks < 0) cfg_.watermark_blocks = std::max<int64_t>(1, cache.n_blocks() / 100);
  if (cfg_.prefix_reuse) index_ = std::make_unique<PrefixIndex>(cache);
  for (int s = cfg_.max_running - 1; s >= 0; --s) free_slots_.push_back(s);
  running_.reserve(static_cast<size_t>(cfg_.max_running));
}

void Scheduler::enqueue(std::unique_ptr<Sequence> s) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), s->order,
                              [](uint64_t o, const std::unique_ptr<Sequence>& w) { return o < w->order; });
  waiting_.insert(pos, std::move(s));
}

void Scheduler::release(Sequence& s, bool written) {
  if (s.slot < 0) return;
  if (index_ && written) {
    s.n_ready = s.n_computed;
    index_blocks(s);
    index_partial_block(s);
  }
  cache_.release(s.slot);
  free_slots_.push_back(s.slot);
  s.slot = -1;
  s.n_indexed = 0;
  s.index_tail = 0;
}

void Scheduler::index_blocks(Sequence& s) {
  // Full blocks whose K/V earlier steps wrote.
  const int64_t bs = cache_.block_size();
  while ((s.n_indexed + 1) * bs <= s.n_ready && s.index_chain_intact()) {
    s.index_tail = index_->add(cache_.block(s.slot, s.n_indexed), s.index_tail, s.tokens.data() + s.n_indexed * bs);
    s.n_indexed++;
  }
}

void Scheduler::index_partial_block(Sequence& s) {
  const int64_t first = s.n_indexed * cache_.block_size();
  const int64_t rows = s.n_ready - first;
  if (rows <= 0 || rows >= cache_.block_size() || !s.index_chain_intact()) return;
  index_->add_tail(cache_.block(s.slot, s.n_indexed), s.index_tail, s.tokens.data() + first, rows);
}

void Scheduler::preempt(size_t i) {
  auto s = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  release(*s, true);
  s->n_computed = 0;  // recomputed from its tokens when it is admitted again
  s->n_preempted++;
  preemptions_++;
  enqueue(std::move(s));
}

void Scheduler::add_chunk(Sequence& s, int64_t n, StepPlan& plan) {
  const int64_t end = s.n_computed + n;
  const bool last = end == static_cast<int64_t>(s.tokens.size());
  // Positions already scored before a preemption are not scored again.
  const int64_t score_end = s.scores_prompt() ? std::min(end, s.n_prompt - 1) : 0;
  for (int64_t p = s.n_computed; p < end; ++p) {
    const bool sample = last && p == end - 1;
    const bool score = p < score_end && p >= s.n_scored;
    if (score) plan.prompt_rows.push_back({&s, p, plan.n_logits});
    if (sample) {
      plan.rows.push_back(&s);
      plan.row_logits.push_back(plan.n_logits);
    }
    plan.batch.add(s.tokens[p], static_cast<int32_t>(p), s.slot, sample || score);
    plan.n_logits += sample || score;
  }
  s.n_scored = std::max(s.n_scored, score_end);
  s.n_computed = end;
}

const Sequence* Scheduler::longest_prefix(const Sequence& s, int64_t& ready, int64_t& soon) const {
  // At least the last token is computed again: its logits pick the next token.
  const int64_t limit = static_cast<int64_t>(s.tokens.size()) - 1;
  const Sequence* src = nullptr;
  ready = soon = 0;
  for (const auto& r : running_) {
    const int64_t n = std::min(limit, r->n_computed);  // n_ready <= n_computed
    int64_t i = 0;
    while (i < n && r->tokens[i] == s.tokens[i]) ++i;
    soon = std::max(soon, i);
    if (std::min(i, r->n_ready) > ready) {
      ready = std::min(i, r->n_ready);
      src = r.get();
    }
  }
  return src;
}

bool Scheduler::try_admit(int64_t& budget, StepPlan& plan) {
  if (waiting_.empty() || free_slots_.empty() || budget <= 0) return false;
  Sequence& s = *waiting_.front();
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  const int64_t bs = cache_.block_size();
  match_.blocks.clear();
  match_.last = 0;
  KvRows copy;  // rows copied into the first block past the attached ones
  int64_t reused = 0;
  // A reused prefix has no logits, and a request that scores its prompt needs them all.
  if (index_ && !s.scores_prompt()) {
    // At least the last token is computed again: its logits pick the next token.
    const int64_t limit = n - 1;
    index_->match(s.tokens.data(), limit, match_);
    const int64_t attached = static_cast<int64_t>(match_.blocks.size()) * bs;
    copy = index_->longest_next(match_.last, s.tokens.data() + attached, limit - attached);
    // A running sequence may share more of the next block (its K/V are not in the index
    // until it leaves), or be computing a long prefix of this one right now (requests with
    // one system prompt arriving together): then wait for it rather than compute the
    // same prefix twice.
    int64_t ready = 0, soon = 0;
    const Sequence* src = longest_prefix(s, ready, soon);
    if (ready - attached > copy.rows) {
      copy = {cache_.block(src->slot, static_cast<int64_t>(match_.blocks.size())), std::min(ready - attached, bs)};
    }
    reused = attached + copy.rows;
    if (soon - reused >= bs) return false;
  }
  // With nothing running, the head may use the whole pool (it always fits: requests are
  // checked against the context size, and the pool holds at least one full context).
  const int64_t keep = running_.empty() ? 0 : cfg_.watermark_blocks;
  int64_t cost = cache_.attach_cost(match_.blocks, n, copy);
  if (copy.rows > 0 && cost + keep > cache_.free_blocks()) {
    // Holding the copied block while the pool is drawn on takes one block more: compute
    // those rows instead, so that the head of the queue always fits an empty pool.
    reused -= copy.rows;
    copy = {};
    cost = cache_.attach_cost(match_.blocks, n);
  }
  if (cost + keep > cache_.free_blocks()) return false;
  const int slot = free_slots_.back();
  if (!cache_.attach(slot, match_.blocks, n, copy)) return false;
  free_slots_.pop_back();
  s.slot = slot;
  s.n_indexed = static_cast<int64_t>(match_.blocks.size());
  s.index_tail = match_.last;
  s.n_computed = s.n_ready = reused;
  // What the client is told it saved, /metrics' reuse and the queue time: the first
  // admission's (a preempted sequence later finds its own blocks again, after it ran).
  if (s.n_preempted == 0) {
    plan.n_reused += reused;
    s.req->set_cached_prompt_tokens(reused);
    s.admitted = Clock::now();
  }
  auto owned = std::move(waiting_.front());
  waiting_.pop_front();
  auto pos = std::upper_bound(running_.begin(), running_.end(), owned->order,
                              [](uint64_t o, const std::unique_ptr<Sequence>& r) { return o < r->order; });
  Sequence& ref = **running_.insert(pos, std::move(owned));
  const int64_t chunk = std::min(budget, n - reused);
  add_chunk(ref, chunk, plan);
  budget -= chunk;
  plan.n_prefill += chunk;
  plan.n_admitted++;
  return true;
}

bool Scheduler::schedule(StepPlan& plan) {
  plan.clear();
  for (auto& s : running_) {
    s->n_ready = s->n_computed;
    if (index_) index_blocks(*s);
  }
  // Room for every known token of every running sequence; preempt the newest on failure.
  for (size_t i = 0; i < running_.size();) {
    Sequence& s = *running_[i];
    if (cache_.reserve(s.slot, static_cast<int64_t>(s.tokens.size()))) {
      ++i;
      continue;
    }
    preempt(running_.size() - 1);
    plan.n_preempted++;
    // If s itself was the newest it is gone now and index i is past the end.
  }

  int64_t budget = cfg_.max_batch_tokens;
  // Decode tokens first, so running requests keep their pace while prompts stream in.
  for (auto& s : running_) {
    if (s->pending() == 1) {
      add_chunk(*s, 1, plan);
      budget--;
      plan.n_decode++;
    }
  }
  // Then the rest of partly read prompts, oldest first.
  for (auto& s : running_) {
    if (budget <= 0) break;
    const int64_t p = s->pending();
    if (p <= 1) continue;
    const int64_t chunk = std::min(budget, p);
    add_chunk(*s, chunk, plan);
    budget -= chunk;
    plan.n_prefill += chunk;
  }
  // Then new sequences while slots, blocks and budget last.
  while (try_admit(budget, plan)) {
  }
  return plan.batch.size() > 0;
}

}  // namespace sy
