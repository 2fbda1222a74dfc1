#include "runtime/request.h"

#include <algorithm>

namespace sy {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::None:
      return "none";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "?";
}

uint64_t Channel::wait(uint64_t version, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return version_ != version; });
  return version_;
}

Request::Request(std::vector<int32_t> prompt, GenerationParams params, std::shared_ptr<Channel> channel)
    : prompt_(std::move(prompt)),
      params_(std::move(params)),
      channel_(std::move(channel)),
      arrival_(Clock::now()) {
  const auto reserve = static_cast<size_t>(std::clamp<int64_t>(params_.max_tokens, 0, 1 << 16));
  tokens_.reserve(reserve);
  if (params_.top_logprobs >= 0) {
    logprob_.reserve(reserve);
    top_.reserve(reserve * static_cast<size_t>(params_.top_logprobs));
  }
  if (params_.prompt_logprobs && params_.top_logprobs >= 0 && prompt_.size() > 1) {
    prompt_logprob_.assign(prompt_.size() - 1, 0.0f);
    prompt_top_.assign((prompt_.size() - 1) * static_cast<size_t>(params_.top_logprobs), TokenLogprob{-1, 0.0f});
  }
}

namespace {

// Token i's k alternatives sit at [i * k, (i + 1) * k); unused entries have id -1.
GeneratedLogprob unpack(int32_t token, float logprob, const std::vector<TokenLogprob>& top, size_t i, size_t k) {
  GeneratedLogprob g{token, logprob, {}};
  for (size_t j = i * k; j < (i + 1) * k; ++j)
    if (top[j].first >= 0) g.top.push_back(top[j]);
  return g;
}

void pack(std::vector<TokenLogprob>& top, size_t i, size_t k, std::span<const TokenLogprob> from) {
  for (size_t j = 0; j < k; ++j) top[i * k + j] = j < from.size() ? from[j] : TokenLogprob{-1, 0.0f};
}

}  // namespace

Request::Update Request::poll(size_t seen, std::vector<int32_t>& out, std::vector<GeneratedLogprob>* logprobs) const {
  std::lock_guard lock(channel_->mu_);
  Update u;
  u.n_tokens = tokens_.size();
  if (u.n_tokens > seen)
    out.insert(out.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(seen), tokens_.end());
  if (logprobs && params_.top_logprobs >= 0) {
    const auto k = static_cast<size_t>(params_.top_logprobs);
    for (size_t i = seen; i < logprob_.size(); ++i) logprobs->push_back(unpack(tokens_[i], logprob_[i], top_, i, k));
  }
  u.finish = finish_;
  if (finish_ == FinishReason::Error) u.error = error_;
  return u;
}

Request::Update Request::wait_finished(std::vector<int32_t>& out) const {
  {
    std::unique_lock lock(channel_->mu_);
    channel_->cv_.wait(lock, [&] { return finish_ != FinishReason::None; });
  }
  out.clear();
  return poll(0, out);
}

void Request::push_token(int32_t token) { push_token(token, 0.0f, {}); }

void Request::push_token(int32_t token, float logprob, std::span<const TokenLogprob> top) {
  {
    std::lock_guard lock(channel_->mu_);
    tokens_.push_back(token);
    if (params_.top_logprobs >= 0) {
      logprob_.push_back(logprob);
      const auto k = static_cast<size_t>(params_.top_logprobs);
      top_.resize(top_.size() + k);  // within the reserve
      pack(top_, logprob_.size() - 1, k, top);
    }
    channel_->version_++;
  }
  channel_->cv_.notify_all();
}

void Request::set_prompt_logprob(int64_t pos, float logprob, std::span<const TokenLogprob> top) {
  std::lock_guard lock(channel_->mu_);
  const auto i = static_cast<size_t>(pos);
  if (i >= prompt_logprob_.size()) return;
  prompt_logprob_[i] = logprob;
  pack(prompt_top_, i, static_cast<size_t>(params_.top_logprobs), top);
}

std::vector<GeneratedLogprob> Request::prompt_logprobs() const {
  std::lock_guard lock(channel_->mu_);
  std::vector<GeneratedLogprob> out;
  const auto k = static_cast<size_t>(std::max(0, params_.top_logprobs));
  for (size_t i = 0; i < prompt_logprob_.size(); ++i)
    out.push_back(unpack(prompt_[i + 1], prompt_logprob_[i], prompt_top_, i, k));
  return out;
}

bool Request::stop() {
  std::lock_guard lock(channel_->mu_);
  end_early(kStop);
  return settled_length_ && cancel_.load(std::memory_order_relaxed) == kStop;
}

FinishReason Request::settle_finish(FinishReason reason) {
  std::lock_guard lock(channel_->mu_);
  if (reason == FinishReason::Length && cancel_.load(std::memory_order_relaxed) == kStop) return FinishReason::Stop;
  settled_length_ = reason == FinishReason::Length;
  return reason;
}

void Request::finish(FinishReason reason, std::string error) {
  {
    std::lock_guard lock(channel_->mu_);
    if (finish_ != FinishReason::None) return;
    finish_ = reason;
    error_ = std::move(error);
    channel_->version_++;
  }
  channel_->cv_.notify_all();
}

}  // namespace sy
