// The serving engine: one thread owns the Forward pass, the paged KV cache and the
// scheduler, and runs steps while there is work. Clients (HTTP handler threads) never touch
// the model: they submit Requests through a locked inbox and read tokens back through
// each request's channel. Every step evaluates the decode tokens of all running requests
// and prefill chunks of new ones as one ragged batch, so each MoE layer reads every active
// expert's weights once per step for all of them.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "moe/routing_observer.h"
#include "runtime/engine_stats.h"
#include "runtime/kv_cache.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace sy {

struct EngineConfig {
  int n_threads = 0;  // 0: the CPUs this process may use (base/cpu_info.h)
  MoeOptions moe;
  int parallel = 8;            // sequences in the running batch at most
  int64_t ctx_size = 0;        // positions per request (prompt + generated); 0: the model's, at most 4096
  int64_t kv_tokens = 0;       // KV pool in positions; 0: parallel * ctx_size (at most ~2 GiB, >= ctx_size)
  int64_t block_size = 16;     // positions per KV block
  int64_t batch_tokens = 512;  // tokens per step (decode + prefill chunks)
  size_t max_queue = 64;       // waiting requests beyond which submit() refuses
  bool prefix_reuse = true;    // reuse the K/V of a prompt prefix computed before (runtime/prefix_index.h)
  // Also sees every step's routing, on the engine's thread (an expert trace, `serve
  // --trace-experts`); not owned, may be null, must outlive the engine.
  RoutingObserver* routing_observer = nullptr;
};

// Tokens per (layer, expert), counted from the routing decisions of each step.
class ExpertTokenCounter final : public RoutingObserver {
 public:
  ExpertTokenCounter(int n_layer, int n_expert)
      : n_expert_(n_expert), counts_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0) {}
  void on_routing(int layer, const Routing& r, const DispatchPlan&) override {
    uint64_t* c = counts_.data() + static_cast<size_t>(layer) * static_cast<size_t>(n_expert_);
    for (int32_t e : r.expert) c[e]++;
  }
  std::vector<uint64_t>& counts() { return counts_; }

 private:
  int n_expert_;
  std::vector<uint64_t> counts_;  // layer-major, since the last publish
};

class Engine {
 public:
  enum class Submit { Ok, QueueFull, ShuttingDown };

  // Throws sy::Error for impossible settings (naming the flag).
  Engine(const Model& model, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Adds an observer of every MoE layer's routing (an expert trace) to the one the engine
  // keeps for /metrics. Only before the first request is submitted.
  void set_routing_observer(RoutingObserver* observer);

  // Queues all of `reqs` or none. Throws sy::Error for a request that can never run (empty
  // prompt, token id out of range, prompt + max_tokens beyond the context, bad sampling
  // parameters); callers validate first to name the field at fault.
  Submit submit(const std::vector<std::shared_ptr<Request>>& reqs);

  // Shutdown, in this order: refuse new requests, let running ones finish for a while,
  // cancel what is left, stop the thread.
  void stop_accepting();
  bool accepting() const;
  // True when no request is queued or running (waits at most `timeout` for that).
  bool wait_idle(Clock::duration timeout);
  void cancel_all();
  // A stop string the client matched in a request the engine had already finished at its
  // token limit (the string completed on the last token): counted as the stop the client's
  // answer reports, not as the length the engine recorded.
  void recount_length_as_stop();
  void stop();

  const EngineConfig& config() const { return cfg_; }
  const Model& model() const { return model_; }
  const EngineStats& stats() const { return stats_; }

 private:
  void attach_observers();  // expert_tokens_ and cfg_.routing_observer onto the forward pass
  void loop();
  void step();
  void sample_rows();
  void score_prompt_rows();  // prompt log-probabilities of this step's scored positions
  void finish(Sequence& s, FinishReason r, const std::string& error = {});
  size_t queued_locked() const;  // waiting sequences whose request is still wanted (mu_ held)
  void apply_penalties(Sequence& s, float* logits) const;
  void record_token(Sequence& s, int32_t token);
  void publish_stats(double forward_seconds);

  const Model& model_;
  EngineConfig cfg_;
  int64_t n_vocab_;
  ThreadPool pool_;
  Forward forward_;
  ExpertTokenCounter expert_tokens_;
  std::unique_ptr<RoutingObservers> observers_;  // expert_tokens_ and cfg_.routing_observer, when both
  KvCache cache_;
  Scheduler sched_;
  EngineStats stats_;

  // Inbox and lifecycle, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;  // engine: new work or stop
  std::condition_variable idle_;  // waiters of wait_idle
  std::vector<std::unique_ptr<Sequence>> inbox_;
  uint64_t next_order_ = 0;
  // The requests of the scheduler's waiting sequences once a step's are admitted, copied for
  // submit(): one cancelled while the engine computes the step still waits there until the
  // next, but no longer holds a place in the queue.
  std::vector<std::shared_ptr<Request>> waiting_reqs_;
  bool busy_ = false;     // the scheduler has work
  bool accepting_ = true, cancel_all_ = false, stop_ = false;

  // Engine thread only: step buffers, reused so steady-state steps do not allocate.
  StepPlan plan_;
  std::vector<float> logits_;
  std::vector<int32_t> sampled_;
  std::vector<LogprobRow> thread_logprobs_;  // per pool thread, for prompt rows
  std::vector<std::unique_ptr<Sequence>> incoming_;
  std::vector<double> obs_ttft_, obs_tpot_, obs_e2e_, obs_queue_;
  uint64_t n_generated_step_ = 0;

  // Finishes are delivered after the step's stats are published, so a client that has its
  // response sees its tokens in /metrics.
  struct PendingFinish {
    std::shared_ptr<Request> req;
    FinishReason reason;
    std::string error;
  };
  std::vector<PendingFinish> pending_finish_;
  std::thread thread_;
};

// Resolved settings for a model: ctx_size and kv_tokens filled in, checked.
EngineConfig resolve_engine_config(const Model& model, EngineConfig cfg);

}  // namespace sy
