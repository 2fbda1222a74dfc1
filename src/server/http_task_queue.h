// The HTTP server's worker threads. cpp-httplib serves each connection on one thread for
// as long as it stays open: a streaming request for its whole generation, an idle
// keep-alive connection (the connection pools of client libraries keep them) or one that
// sends nothing for up to the 5 s read timeout. A fixed pool sized for the running and
// queued requests left nothing for /health or a new request once that many connections
// sat open: they waited in line until one closed. This pool starts threads as connections
// need them, up to a limit, and lets the extra ones go after they idle for a while.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sy {

class ElasticTaskQueue : public httplib::TaskQueue {
 public:
  // `base` threads start at once and stay; up to `most` in all, the others started when a
  // connection finds no idle thread and ended after `idle_exit` without work. A thread the
  // system refuses to start leaves the connection queued for the next free one.
  ElasticTaskQueue(size_t base, size_t most, std::chrono::milliseconds idle_exit = std::chrono::seconds(10));
  ~ElasticTaskQueue() override;
  ElasticTaskQueue(const ElasticTaskQueue&) = delete;
  ElasticTaskQueue& operator=(const ElasticTaskQueue&) = delete;

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread (as httplib::ThreadPool does).
  void shutdown() override;

  size_t limit() const { return most_; }  // the most threads at once
  size_t threads() const;                 // running now
  size_t peak_threads() const;            // the most that ran at once

 private:
  void work(bool extra);
  void start_thread_locked(bool extra);

  const size_t most_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> exited_;  // extra threads that ended, to join
  size_t live_ = 0, idle_ = 0, peak_ = 0;
  bool shutdown_ = false;
};

}  // namespace sy
