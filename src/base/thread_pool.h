// Persistent worker threads. A parallel_for publishes one job; every thread, the caller
// included, claims task indices from a single atomic word that holds the job id, its task
// count and the next index, so a worker that wakes up late (or was preempted on a busy
// machine) can never delay a job it did not claim work from: the caller waits only for
// tasks that were actually claimed. Threads are created once; between jobs they spin
// briefly (a forward step issues hundreds of small jobs back to back) and then sleep.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/job_profile.h"

namespace sy {

// Spins until `flag` is nonzero (acquire), yielding the core after a while in case the
// thread that sets it was preempted.
void spin_until_set(const std::atomic<int32_t>& flag);

class ThreadPool {
 public:
  // Task body: (task index, thread index in [0, size())).
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for task in [0, n_tasks) and returns when all are done. Tasks
  // are claimed in index order, and a claimed task is always being run, so a task may wait
  // (spin_until_set) for something that a lower-indexed task of the same job sets.
  template <class F>
  void parallel_for(int64_t n_tasks, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    auto trampoline = [](void* ctx, int64_t task, int thread) { (*static_cast<Fn*>(ctx))(task, thread); };
    // __PRETTY_FUNCTION__ names F, the caller's lambda: a job profile's site name.
    run(n_tasks, trampoline, const_cast<void*>(static_cast<const void*>(&fn)), __PRETTY_FUNCTION__);
  }

  // The same, but on the calling thread alone when the tasks only move fewer than about
  // 64K floats in all (`floats`): a job's wake-up and barrier cost more than such copies
  // (a decode step's MoE gather and combine). Work that computes more per float pays for a
  // job sooner: a decode step's 8 expert input quantizations ran x0.92-1.00 inline.
  // Tasks that move fewer than about 16K floats each are claimed in runs of consecutive
  // tasks: every claim is an atomic on a line all threads write, and a batch of 16 rows
  // gathered for 8 experts each (128 copies of 8 KB a layer) spent a quarter of its job in
  // claims (`bench --job-profile`).
  template <class F>
  void parallel_for_sized(int64_t n_tasks, int64_t floats, F&& fn) {
    if (floats < kJobFloats) {
      for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
      return;
    }
    struct Runs {
      F& fn;
      int64_t n_tasks, per_claim;
    } runs{fn, n_tasks, std::max<int64_t>(1, kTaskFloats * n_tasks / floats)};
    auto trampoline = [](void* ctx, int64_t claim, int thread) {
      auto* r = static_cast<Runs*>(ctx);
      const int64_t end = std::min(r->n_tasks, (claim + 1) * r->per_claim);
      for (int64_t i = claim * r->per_claim; i < end; ++i) r->fn(i, thread);
    };
    // Named after the caller's F, like parallel_for's jobs.
    run((n_tasks + runs.per_claim - 1) / runs.per_claim, trampoline, &runs, __PRETTY_FUNCTION__);
  }

  // The CPUs this process can keep busy (base/cpu_info.h), not every CPU of the machine.
  static int default_threads();

  // Times every job from now on into `profile` (null: stop). Call between jobs.
  void set_profile(JobProfile* profile) { profile_.store(profile, std::memory_order_relaxed); }

 private:
  static constexpr int64_t kJobFloats = int64_t{1} << 16;
  static constexpr int64_t kTaskFloats = int64_t{1} << 14;
  struct Job {
    TaskFn fn = nullptr;
    void* ctx = nullptr;
    JobProfile* profile = nullptr;  // times each task when set
  };
  void run(int64_t n_tasks, TaskFn fn, void* ctx, const char* pretty);
  void run_chunk(int64_t n_tasks, TaskFn fn, void* ctx, JobProfile* profile);
  void worker_loop(int thread);
  // Claims and runs tasks of the current job until none is left.
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};

  // [job id: 20 bits | task count: 22 bits | next task: 22 bits]
  std::atomic<uint64_t> state_{0};
  Job jobs_[2];  // indexed by job id & 1; a job's slot is only read after claiming one of its tasks
  std::atomic<int64_t> done_{0};
  uint64_t job_id_ = 0;
  std::atomic<JobProfile*> profile_{nullptr};
};

}  // namespace sy
