// One generation request as the engine and its client share it. The client (an HTTP
// handler thread) builds it, submits it, then reads its tokens; the engine thread appends
// tokens and the finish state. Both sides meet only in these methods, under the mutex of
// the request's Channel; one Channel may serve several requests (the n choices of one API
// call), so their client waits on one condition variable for all of them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/token_logprobs.h"

namespace sy {

using Clock = std::chrono::steady_clock;

struct GenerationParams {
  SamplingParams sampling;
  int64_t max_tokens = 16;  // tokens to generate at most
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  // OpenAI-style penalties over the tokens generated so far, applied to the logits
  // before the sampler: logit -= presence * (count > 0) + frequency * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id, added to its logit
  // -1: no log-probabilities; else each generated token's (runtime/token_logprobs.h) with
  // this many most likely alternatives (0..kMaxTopLogprobs).
  int top_logprobs = -1;
  // Also the log-probabilities of prompt tokens 1..n-1 (needs top_logprobs >= 0); such a
  // request may have max_tokens 0, then it only scores its prompt.
  bool prompt_logprobs = false;
};

// A generated token's log-probability and its most likely alternatives.
struct GeneratedLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

enum class FinishReason {
  None,       // still running
  Stop,       // an end-of-generation token, or a stop string the client matched
  Length,     // max_tokens or the context size
  Cancelled,  // the client went away or cancelled, or the server shut down
  Error,      // the engine failed; the update's error says why
};

const char* to_string(FinishReason r);

// Wakes a client when any of its requests has news.
class Channel {
 public:
  // Waits until the channel changed since `version` or `timeout` passed; returns the
  // current version.
  uint64_t wait(uint64_t version, std::chrono::milliseconds timeout);

 private:
  friend class Request;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t version_ = 0;
};

class Request {
 public:
  Request(std::vector<int32_t> prompt, GenerationParams params,
          std::shared_ptr<Channel> channel = std::make_shared<Channel>());
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  const std::vector<int32_t>& prompt() const { return prompt_; }
  const GenerationParams& params() const { return params_; }
  Channel& channel() const { return *channel_; }
  Clock::time_point arrival() const { return arrival_; }

  // ---- client side ----
  // Asks the engine to drop the request at its next step; the engine frees its KV blocks
  // and finishes it with FinishReason::Cancelled (unless it already finished).
  void cancel() { end_early(kCancel); }
  // The same for a stop string the client matched: finished with FinishReason::Stop, so
  // that /metrics counts it among the stops, with its latency. True when the engine had
  // already settled the request as a Length (its last allowed token completed the stop
  // string): the caller then recounts it (Engine::recount_length_as_stop).
  bool stop();
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed) != kRun; }
  // What the engine finishes a request with when it drops it for the client.
  FinishReason early_finish() const {
    return cancel_.load(std::memory_order_relaxed) == kStop ? FinishReason::Stop : FinishReason::Cancelled;
  }

  struct Update {
    size_t n_tokens = 0;  // tokens generated so far (all of them, not only the new ones)
    FinishReason finish = FinishReason::None;
    std::string error;
  };
  // Appends tokens [seen, n) to `out` without waiting (see Channel::wait), and their
  // log-probabilities to `logprobs` where given (requests with top_logprobs >= 0).
  Update poll(size_t seen, std::vector<int32_t>& out, std::vector<GeneratedLogprob>* logprobs = nullptr) const;
  // Waits until the request finished (for clients that want only the end result).
  Update wait_finished(std::vector<int32_t>& out) const;

  // Log-probabilities of prompt tokens 1..n-1 (params().prompt_logprobs), complete once
  // the first token is out or the request has finished.
  std::vector<GeneratedLogprob> prompt_logprobs() const;
  // Prompt tokens whose K/V came from the prefix cache when the request joined the batch
  // (OpenAI's usage.prompt_tokens_details.cached_tokens); final once its first token is out.
  int64_t cached_prompt_tokens() const { return cached_prompt_tokens_.load(std::memory_order_acquire); }

  // ---- engine side ----
  // Scores prompt token pos + 1 with the logits of position pos.
  void set_prompt_logprob(int64_t pos, float logprob, std::span<const TokenLogprob> top);
  void push_token(int32_t token);
  // The same with the token's log-probability and the row's top alternatives (at most
  // params().top_logprobs of them are kept).
  void push_token(int32_t token, float logprob, std::span<const TokenLogprob> top);
  void finish(FinishReason reason, std::string error = {});
  // The reason the engine counts and then delivers for a request it finishes: a Length
  // becomes a Stop when the client's stop() came first. Settled under the channel's lock,
  // so that exactly one of this and stop() sees the other.
  FinishReason settle_finish(FinishReason reason);
  void set_cached_prompt_tokens(int64_t n) { cached_prompt_tokens_.store(n, std::memory_order_release); }

 private:
  const std::vector<int32_t> prompt_;
  const GenerationParams params_;
  const std::shared_ptr<Channel> channel_;
  const Clock::time_point arrival_;
  static constexpr uint8_t kRun = 0, kCancel = 1, kStop = 2;
  // The first of cancel() and stop() wins: a hang-up after a stop string leaves it a stop.
  void end_early(uint8_t how) {
    uint8_t run = kRun;
    cancel_.compare_exchange_strong(run, how, std::memory_order_relaxed);
  }
  std::atomic<uint8_t> cancel_{kRun};
  std::atomic<int64_t> cached_prompt_tokens_{0};

  // Guarded by channel_->mu_.
  std::vector<int32_t> tokens_;  // reserved up front: no allocation per token
  std::vector<float> logprob_;          // per token, when top_logprobs >= 0 (reserved too)
  std::vector<TokenLogprob> top_;       // top_logprobs per token
  std::vector<float> prompt_logprob_;   // per prompt position 0..n-2, when prompt_logprobs
  std::vector<TokenLogprob> prompt_top_;
  FinishReason finish_ = FinishReason::None;
  bool settled_length_ = false;  // settle_finish counted a Length
  std::string error_;
};

}  // namespace sy
