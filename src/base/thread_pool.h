// Persistent worker threads. A parallel_for hands out task indices through one atomic
// counter; the calling thread works too, so a pool of N threads uses N-1 workers.
// Threads are created once (no per-op thread creation). Between jobs workers spin for a
// short while (a forward step issues hundreds of small jobs back to back, and waking a
// sleeping thread costs tens of microseconds), then sleep on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sy {

class ThreadPool {
 public:
  // Task body: (task index, thread index in [0, size())).
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for task in [0, n_tasks) and returns when all are done.
  template <class F>
  void parallel_for(int64_t n_tasks, F&& fn) {
    auto trampoline = [](void* ctx, int64_t task, int thread) { (*static_cast<F*>(ctx))(task, thread); };
    run(n_tasks, trampoline, &fn);
  }

  static int default_threads();

 private:
  void run(int64_t n_tasks, TaskFn fn, void* ctx);
  void worker_loop(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};

  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
};

}  // namespace sy
