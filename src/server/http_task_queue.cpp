#include "server/http_task_queue.h"

#include <algorithm>
#include <system_error>

namespace sy {

ElasticTaskQueue::ElasticTaskQueue(size_t base, size_t most, std::chrono::milliseconds idle_exit)
    : most_(std::max<size_t>(1, most)), idle_exit_(idle_exit) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < std::min(base, most_); ++i) start_thread_locked(false);
}

ElasticTaskQueue::~ElasticTaskQueue() {
  shutdown();
}

void ElasticTaskQueue::start_thread_locked(bool extra) {
  try {
    threads_.emplace_back([this, extra] { work(extra); });
  } catch (const std::system_error&) {
    return;  // no thread to be had: the job waits for a running one
  }
  ++live_;
  peak_ = std::max(peak_, live_);
}

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::vector<std::thread> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    jobs_.push_back(std::move(fn));
    // Idle threads each take one job; a job beyond them gets a new thread.
    if (jobs_.size() > idle_ && live_ < most_) start_thread_locked(true);
    for (const std::thread::id id : exited_) {
      auto it = std::find_if(threads_.begin(), threads_.end(),
                             [&](const std::thread& t) { return t.get_id() == id; });
      if (it == threads_.end()) continue;
      ended.push_back(std::move(*it));
      *it = std::move(threads_.back());
      threads_.pop_back();
    }
    exited_.clear();
  }
  cv_.notify_one();
  for (std::thread& t : ended) t.join();  // already past their last use of the queue
}

void ElasticTaskQueue::work(bool extra) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    const auto ready = [&] { return !jobs_.empty() || shutdown_; };
    bool woke = true;
    if (extra) {
      woke = cv_.wait_for(lock, idle_exit_, ready);
    } else {
      cv_.wait(lock, ready);
    }
    --idle_;
    if (jobs_.empty()) {
      if (shutdown_ || !woke) break;
      continue;
    }
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    fn = nullptr;  // the connection's state goes with the job, not with the idle thread
    lock.lock();
  }
  --live_;
  if (!shutdown_) exited_.push_back(std::this_thread::get_id());
}

void ElasticTaskQueue::shutdown() {
  std::vector<std::thread> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  // Threads end only after shutdown_ is set, and no new one starts: the list is final once
  // each has been joined, so take it in turns until it is empty.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(threads_);
      exited_.clear();
    }
    if (all.empty()) break;
    for (std::thread& t : all) {
      if (t.joinable()) t.join();
    }
    all.clear();
  }
}

size_t ElasticTaskQueue::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

size_t ElasticTaskQueue::peak_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace sy
