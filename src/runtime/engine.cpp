#include "runtime/engine.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "base/memory_info.h"

namespace sy {
namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

KvCache make_pool(const Model& m, const EngineConfig& c) {
  const HParams& hp = m.hparams();
  const int64_t blocks = (c.kv_tokens + c.block_size - 1) / c.block_size;
  return KvCache(hp.n_layer, hp.k_dim(), hp.v_dim(), blocks, c.block_size, c.parallel, m.kv_type());
}

}  // namespace

void Engine::attach_observers() {
  if (model_.hparams().n_expert == 0) return;
  RoutingObserver* observer = &expert_tokens_;
  if (cfg_.routing_observer) {
    observers_ = std::make_unique<RoutingObservers>(std::vector<RoutingObserver*>{&expert_tokens_, cfg_.routing_observer});
    observer = observers_.get();
  }
  forward_.set_routing_observer(observer);
}

void Engine::set_routing_observer(RoutingObserver* observer) {
  // The engine thread reads it in its steps, which start after a submit() takes mu_.
  std::lock_guard lock(mu_);
  cfg_.routing_observer = observer;
  attach_observers();
}

EngineConfig resolve_engine_config(const Model& model, EngineConfig c) {
  const HParams& hp = model.hparams();
  if (c.parallel < 1 || c.parallel > 4096)
    throw Error("--parallel must be in 1..4096, got " + std::to_string(c.parallel));
  if (c.block_size < 1 || c.block_size > 4096) throw Error("--kv-block-size must be in 1..4096");
  if (c.ctx_size <= 0) c.ctx_size = std::min<int64_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096, 4096);
  if (c.ctx_size < 2) throw Error("--ctx-size must be at least 2");
  // Every running request holds at least one block: blocks longer than a context would let
  // fewer requests run than --parallel says, without a word.
  if (c.block_size > c.ctx_size) {
    throw Error("--kv-block-size " + std::to_string(c.block_size) + " is longer than a context (--ctx-size " +
                std::to_string(c.ctx_size) + "); give at most the context size (default 16)");
  }
  const auto bytes_per_pos =
      static_cast<int64_t>(KvCache::position_bytes(model.kv_type(), hp.n_layer, hp.k_dim(), hp.v_dim()));
  if (c.kv_tokens <= 0) {
    // About 2 GiB, or half of the memory left when that is less (a cgroup that also holds an
    // expert cache), but at least one context: requests beyond it wait for blocks.
    int64_t budget = int64_t{2} << 30;
    const size_t left = available_memory_bytes();
    if (left > 0) budget = std::min(budget, static_cast<int64_t>(left / 2));
    const int64_t cap = std::max<int64_t>(c.ctx_size, budget / std::max<int64_t>(1, bytes_per_pos));
    c.kv_tokens = std::min<int64_t>(c.parallel * c.ctx_size, cap);
  }
  const int64_t ctx_blocks = (c.ctx_size + c.block_size - 1) / c.block_size;
  if ((c.kv_tokens + c.block_size - 1) / c.block_size < ctx_blocks) {
    throw Error("--kv-size " + std::to_string(c.kv_tokens) + " is smaller than one context (--ctx-size " +
                std::to_string(c.ctx_size) + "); a request of full length could never run");
  }
  if (c.batch_tokens < c.parallel) {
    throw Error("--batch-size " + std::to_string(c.batch_tokens) + " must be at least --parallel " +
                std::to_string(c.parallel) + " (every running request decodes one token per step)");
  }
  if (c.max_queue < 1) throw Error("--max-queue must be at least 1");
  return c;
}

Engine::Engine(const Model& model, EngineConfig cfg)
    : model_(model),
      cfg_(resolve_engine_config(model, cfg)),
      n_vocab_(model.hparams().n_vocab),
      pool_(cfg_.n_threads > 0 ? cfg_.n_threads : ThreadPool::default_threads()),
      forward_(model, pool_, cfg_.moe),
      expert_tokens_(model.hparams().n_layer, model.hparams().n_expert),
      cache_(make_pool(model, cfg_)),
      sched_({cfg_.parallel, cfg_.batch_tokens, -1, cfg_.prefix_reuse}, cache_) {
  attach_observers();
  stats_.update([&](EngineStatsData& d) {
    d.kv_blocks_total = cache_.n_blocks();
    d.kv_block_size = cache_.block_size();
    d.layers.resize(static_cast<size_t>(model.hparams().n_layer));
    d.n_expert = model.hparams().n_expert;
    d.expert_tokens.assign(expert_tokens_.counts().size(), 0);
    for (int il = 0; il < model.hparams().n_layer; ++il) d.layers[il].moe = model.hparams().layer_is_moe(il);
  });
  incoming_.reserve(64);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  stop();
}

Engine::Submit Engine::submit(const std::vector<std::shared_ptr<Request>>& reqs) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (const auto& r : reqs) {
    const auto& p = r->prompt();
    if (p.empty()) throw Error("the prompt has no tokens");
    for (int32_t t : p) {
      if (t < 0 || t >= n_vocab_) {
        throw Error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                    std::to_string(n_vocab_ - 1) + ")");
      }
    }
    const bool scores_prompt = r->params().prompt_logprobs;
    if (scores_prompt && r->params().top_logprobs < 0)
      throw Error("prompt log-probabilities need top_logprobs >= 0");
    if (r->params().max_tokens < (scores_prompt ? 0 : 1))
      throw Error(scores_prompt ? "max_tokens must be at least 0" : "max_tokens must be at least 1");
    if (r->params().top_logprobs > kMaxTopLogprobs)
      throw Error("top_logprobs must be at most " + std::to_string(kMaxTopLogprobs));
    if (static_cast<int64_t>(p.size()) + r->params().max_tokens > cfg_.ctx_size) {
      throw Error("the prompt (" + std::to_string(p.size()) + " tokens) plus max_tokens (" +
                  std::to_string(r->params().max_tokens) + ") exceed the context size " +
                  std::to_string(cfg_.ctx_size));
    }
    seqs.push_back(std::make_unique<Sequence>(r, 0));  // validates the sampling parameters
  }
  uint64_t prompt_tokens = 0;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) return Submit::ShuttingDown;
    if (queued_locked() + seqs.size() > cfg_.max_queue) {
      // One per choice, as the submitted count is.
      stats_.update([n = seqs.size()](EngineStatsData& d) { d.requests_rejected += n; });
      return Submit::QueueFull;
    }
    for (auto& s : seqs) {
      s->order = next_order_++;
      prompt_tokens += static_cast<uint64_t>(s->n_prompt);
      inbox_.push_back(std::move(s));
    }
  }
  wake_.notify_one();
  stats_.update([&](EngineStatsData& d) {
    d.requests_submitted += reqs.size();
    d.prompt_tokens += prompt_tokens;
  });
  return Submit::Ok;
}

size_t Engine::queued_locked() const {
  size_t n = 0;
  for (const auto& r : waiting_reqs_) n += r->cancel_requested() ? 0 : 1;
  for (const auto& s : inbox_) n += s->req->cancel_requested() ? 0 : 1;
  return n;
}

void Engine::stop_accepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool Engine::accepting() const {
  std::lock_guard lock(mu_);
  return accepting_;
}

bool Engine::wait_idle(Clock::duration timeout) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, timeout, [&] { return !busy_ && inbox_.empty(); });
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mu_);
    cancel_all_ = true;
  }
  wake_.notify_one();
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    cancel_all_ = true;
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
  for (;;) {
    bool cancel_all = false;
    {
      std::unique_lock lock(mu_);
      busy_ = !sched_.idle();
      if (!busy_ && inbox_.empty()) idle_.notify_all();
      wake_.wait(lock, [&] { return stop_ || cancel_all_ || !inbox_.empty() || !sched_.idle(); });
      if (stop_ && sched_.idle() && inbox_.empty()) break;
      incoming_.swap(inbox_);
      // They wait in the scheduler now, where step() lists them again after schedule():
      // until then submit() must still count them against --max-queue.
      for (const auto& s : incoming_) waiting_reqs_.push_back(s->req);
      cancel_all = cancel_all_;
      cancel_all_ = false;  // one shot: by then new requests are refused
    }
    for (auto& s : incoming_) sched_.enqueue(std::move(s));
    incoming_.clear();
    sched_.remove_if([&](const Sequence& s) { return cancel_all || s.req->cancel_requested(); },
                     [&](std::unique_ptr<Sequence> s) {
                       finish(*s, s->req->cancel_requested() ? s->req->early_finish() : FinishReason::Cancelled);
                     });
    step();
  }
  std::lock_guard lock(mu_);
  busy_ = false;
  idle_.notify_all();
}

void Engine::step() {
  const bool work = sched_.schedule(plan_);
  {
    // What still waits once this step's sequences are admitted: the queue submit() sees
    // while the step computes.
    std::lock_guard lock(mu_);
    waiting_reqs_.clear();
    sched_.for_each_waiting([&](const Sequence& s) { waiting_reqs_.push_back(s.req); });
  }
  if (!work) {
    publish_stats(0.0);
    return;
  }
  const auto t0 = Clock::now();
  try {
    forward_.run(plan_.batch, cache_, logits_);
  } catch (const std::exception& e) {
    // Only the sequences of this batch are at fault (their caches are half written):
    // fail them and keep serving the rest.
    std::vector<uint8_t> in_batch(static_cast<size_t>(cache_.n_seq()), 0);
    for (int32_t slot : plan_.batch.seq) in_batch[slot] = 1;
    const std::string msg = std::string("the forward pass failed: ") + e.what();
    std::fprintf(stderr, "engine: %s\n", msg.c_str());
    sched_.remove_if([&](const Sequence& s) { return s.slot >= 0 && in_batch[s.slot]; },
                     [&](std::unique_ptr<Sequence> s) { finish(*s, FinishReason::Error, msg); },
                     /*written=*/false);
    publish_stats(0.0);
    return;
  }
  const double fwd = seconds(Clock::now() - t0);
  sample_rows();
  sched_.remove_if([](const Sequence& s) { return s.done; }, [](std::unique_ptr<Sequence>) {});
  publish_stats(fwd);
}

void Engine::apply_penalties(Sequence& s, float* logits) const {
  const GenerationParams& p = s.req->params();
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  if (p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  for (int32_t id : s.seen)
    logits[id] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(s.counts[id]);
}

void Engine::record_token(Sequence& s, int32_t token) {
  const GenerationParams& p = s.req->params();
  s.tokens.push_back(token);
  s.sampler.accept(token);
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    if (s.counts.empty()) s.counts.assign(static_cast<size_t>(n_vocab_), 0);
    if (s.counts[token]++ == 0) s.seen.push_back(token);
  }
  if (p.top_logprobs >= 0) s.req->push_token(token, s.logprobs.logprob(token), s.logprobs.top());
  else s.req->push_token(token);
  n_generated_step_++;
}

void Engine::score_prompt_rows() {
  if (plan_.prompt_rows.empty()) return;
  if (thread_logprobs_.size() < static_cast<size_t>(pool_.size())) thread_logprobs_.resize(pool_.size());
  pool_.parallel_for(static_cast<int64_t>(plan_.prompt_rows.size()), [&](int64_t i, int thread) {
    const StepPlan::PromptRow& r = plan_.prompt_rows[i];
    LogprobRow& lp = thread_logprobs_[static_cast<size_t>(thread)];
    lp.compute(logits_.data() + r.logits_row * n_vocab_, n_vocab_, r.seq->req->params().top_logprobs);
    r.seq->req->set_prompt_logprob(r.pos, lp.logprob(r.seq->tokens[r.pos + 1]), lp.top());
  });
}

void Engine::sample_rows() {
  const Tokenizer& tok = model_.tokenizer();
  const auto now = Clock::now();
  // Rows are independent (each sequence has its own sampler and logits row), and a full
  // sort of the vocabulary per row adds up at large batches: sample on the pool.
  score_prompt_rows();
  const size_t n = plan_.rows.size();
  sampled_.resize(n);
  pool_.parallel_for(static_cast<int64_t>(n), [&](int64_t i, int) {
    Sequence& s = *plan_.rows[i];
    if (s.req->params().max_tokens == 0) return;  // it only scores its prompt
    float* row = logits_.data() + plan_.row_logits[i] * n_vocab_;
    const int top = s.req->params().top_logprobs;
    if (top >= 0) s.logprobs.compute(row, n_vocab_, top);  // before penalties edit the row
    apply_penalties(s, row);
    sampled_[i] = s.sampler.sample(row, n_vocab_);
  });
  for (size_t i = 0; i < n; ++i) {
    Sequence& s = *plan_.rows[i];
    const GenerationParams& p = s.req->params();
    if (p.max_tokens == 0) {
      finish(s, FinishReason::Length);
      continue;
    }
    const int32_t t = sampled_[i];
    if (!p.ignore_eos && tok.is_eog(t)) {
      finish(s, FinishReason::Stop);
      continue;
    }
    record_token(s, t);
    if (s.n_generated() == 1) {
      obs_ttft_.push_back(seconds(now - s.req->arrival()));
      obs_queue_.push_back(seconds(s.admitted - s.req->arrival()));
    } else {
      obs_tpot_.push_back(seconds(now - s.last_token));
    }
    s.last_token = now;
    if (s.n_generated() >= p.max_tokens || static_cast<int64_t>(s.tokens.size()) >= cfg_.ctx_size) {
      finish(s, FinishReason::Length);
    }
  }
}

void Engine::recount_length_as_stop() {
  // Request::stop() says so only for a request settle_finish() settled as a Length, which
  // publish_stats counts in the same update.
  stats_.update([](EngineStatsData& d) {
    if (d.finished_length == 0) return;
    d.finished_length--;
    d.finished_stop++;
  });
}

void Engine::finish(Sequence& s, FinishReason r, const std::string& error) {
  s.done = true;
  pending_finish_.push_back({s.req, r, error});
  if (r == FinishReason::Stop || r == FinishReason::Length)
    obs_e2e_.push_back(seconds(Clock::now() - s.req->arrival()));
}

void Engine::publish_stats(double fwd) {
  const auto& moe = forward_.moe_stats();
  stats_.update([&](EngineStatsData& d) {
    if (plan_.batch.size() > 0) {
      d.steps++;
      d.computed_tokens += static_cast<uint64_t>(plan_.batch.size());
      d.batch_tokens.observe(static_cast<double>(plan_.batch.size()));
      d.busy_seconds += fwd;
      d.reused_tokens += static_cast<uint64_t>(plan_.n_reused);
      auto& counts = expert_tokens_.counts();
      for (size_t i = 0; i < counts.size(); ++i) {
        d.expert_tokens[i] += counts[i];
        counts[i] = 0;
      }
      for (size_t il = 0; il < d.layers.size() && il < moe.size(); ++il) {
        if (!d.layers[il].moe) continue;
        d.layers[il].routed_tokens += static_cast<uint64_t>(moe[il].tokens);
        d.layers[il].active_experts += static_cast<uint64_t>(moe[il].active_experts);
        d.layers[il].expert_bytes_read += moe[il].expert_bytes_read;
        d.layers[il].last_active = moe[il].active_experts;
      }
    }
    d.last_batch_tokens = plan_.batch.size();
    d.generated_tokens += n_generated_step_;
    // Counted before the requests hear of it (a client reading /metrics after its answer
    // finds its own request there), each as settled against a stop() of its client, under
    // the stats lock: a client's recount of a settled Length waits for this count.
    for (PendingFinish& f : pending_finish_) {
      f.reason = f.req->settle_finish(f.reason);
      switch (f.reason) {
        case FinishReason::Stop: d.finished_stop++; break;
        case FinishReason::Length: d.finished_length++; break;
        case FinishReason::Cancelled: d.finished_cancelled++; break;
        default: d.finished_error++; break;
      }
    }
    d.preemptions = static_cast<uint64_t>(sched_.preemptions());
    for (double v : obs_ttft_) d.ttft.observe(v);
    for (double v : obs_tpot_) d.tpot.observe(v);
    for (double v : obs_e2e_) d.e2e.observe(v);
    for (double v : obs_queue_) d.queue_time.observe(v);
    d.queue_depth = static_cast<int64_t>(sched_.n_waiting());
    d.running = static_cast<int64_t>(sched_.n_running());
    d.kv_blocks_used = cache_.n_blocks() - cache_.free_blocks();
    d.kv_blocks_cached = cache_.cached_blocks();
  });
  obs_ttft_.clear();
  obs_tpot_.clear();
  obs_e2e_.clear();
  obs_queue_.clear();
  n_generated_step_ = 0;
  for (PendingFinish& f : pending_finish_) f.req->finish(f.reason, f.error);
  pending_finish_.clear();
}

}  // namespace sy
