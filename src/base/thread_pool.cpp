#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define SY_PAUSE() _mm_pause()
#else
#define SY_PAUSE() std::this_thread::yield()
#endif

namespace sy {
namespace {
// How long an idle worker spins before sleeping: long enough to cover the gap between
// the jobs of one forward step, short enough not to burn a core between requests.
constexpr auto kSpin = std::chrono::microseconds(200);
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::work(int thread) {
  for (;;) {
    int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    fn_(ctx_, task, thread);
  }
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  // seq_cst on both: the store of the new generation must not pass the load of
  // sleepers_, or a worker going to sleep right now would miss the job.
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  work(0);
  // Workers finish within the job's last task: spin, but yield the core after a while in
  // case a worker was preempted (an oversubscribed machine).
  for (int polls = 0; active_.load(std::memory_order_acquire) != 0; ++polls) {
    if (polls < 4096) SY_PAUSE();
    else std::this_thread::yield();
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    int polls = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      SY_PAUSE();
      if (++polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        break;
      }
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    work(thread);
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace sy
