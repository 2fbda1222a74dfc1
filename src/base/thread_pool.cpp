#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/cpu_info.h"
#include "base/worker_signals.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SY_PAUSE() _mm_pause()
#else
#define SY_PAUSE() std::this_thread::yield()
#endif

namespace sy {
namespace {

constexpr int kIndexBits = 22;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr int64_t kMaxTasks = static_cast<int64_t>(kIndexMask);
constexpr uint64_t kJobMask = (uint64_t{1} << 20) - 1;

uint64_t job_of(uint64_t s) { return s >> (2 * kIndexBits); }
int64_t count_of(uint64_t s) { return static_cast<int64_t>((s >> kIndexBits) & kIndexMask); }
int64_t next_of(uint64_t s) { return static_cast<int64_t>(s & kIndexMask); }

// How long an idle worker spins before sleeping: long enough to cover the gap between
// the jobs of one forward step, short enough not to burn a core between requests.
constexpr auto kSpin = std::chrono::microseconds(300);

// Polls done() until it holds, pausing between polls and, after a while, yielding the
// core instead, in case the thread that makes it hold was preempted.
template <class Done>
void spin_then_yield_until(Done done) {
  for (int polls = 0; !done(); ++polls) {
    if (polls < 4096) SY_PAUSE();
    else std::this_thread::yield();
  }
}

}  // namespace

void spin_until_set(const std::atomic<int32_t>& flag) {
  spin_then_yield_until([&] { return flag.load(std::memory_order_acquire) != 0; });
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] {
    block_stop_signals_in_this_thread();
    worker_loop(t);
  });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::default_threads() { return usable_cpus(); }

void ThreadPool::work(int thread) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (next_of(s) >= count_of(s)) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed task next_of(s) of job job_of(s): that job cannot end before this task
    // does, so its slot is still valid.
    const Job& job = jobs_[job_of(s) & 1];
    if (job.profile) {
      const auto t0 = JobProfile::Clock::now();
      job.fn(job.ctx, next_of(s), thread);
      job.profile->add_busy(thread, JobProfile::Clock::now() - t0);
    } else {
      job.fn(job.ctx, next_of(s), thread);
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx, const char* pretty) {
  if (n_tasks <= 0) return;
  JobProfile* profile = profile_.load(std::memory_order_relaxed);
  JobProfile::JobStart began;
  if (profile) began = profile->job_started(reinterpret_cast<const void*>(fn), pretty);
  for (int64_t start = 0; start < n_tasks; start += kMaxTasks) {
    // Jobs larger than the index field are run in pieces.
    struct Offset {
      TaskFn fn;
      void* ctx;
      int64_t start;
    } off{fn, ctx, start};
    if (start == 0 && n_tasks <= kMaxTasks) {
      run_chunk(n_tasks, fn, ctx, profile);
    } else {
      run_chunk(std::min(kMaxTasks, n_tasks - start),
                [](void* c, int64_t t, int th) {
                  auto* o = static_cast<Offset*>(c);
                  o->fn(o->ctx, o->start + t, th);
                },
                &off, profile);
    }
  }
  if (profile) profile->job_ended(n_tasks, began);
}

void ThreadPool::run_chunk(int64_t n_tasks, TaskFn fn, void* ctx, JobProfile* profile) {
  if (n_threads_ == 1 || n_tasks == 1) {
    const auto t0 = profile ? JobProfile::Clock::now() : JobProfile::Clock::time_point{};
    for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
    if (profile) profile->add_busy(0, JobProfile::Clock::now() - t0);
    return;
  }
  job_id_ = (job_id_ + 1) & kJobMask;
  jobs_[job_id_ & 1] = {fn, ctx, profile};
  done_.store(0, std::memory_order_relaxed);
  // seq_cst: the new state must be visible before sleepers_ is read, or a worker going
  // to sleep right now could miss the job.
  state_.store((job_id_ << (2 * kIndexBits)) | (static_cast<uint64_t>(n_tasks) << kIndexBits),
               std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  work(0);
  // Only tasks already claimed can be outstanding.
  spin_then_yield_until([&] { return done_.load(std::memory_order_acquire) == n_tasks; });
}

void ThreadPool::worker_loop(int thread) {
  uint64_t finished_job = job_of(state_.load());
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    int polls = 0;
    uint64_t s;
    while (job_of(s = state_.load(std::memory_order_acquire)) == finished_job && !stop_.load(std::memory_order_relaxed)) {
      SY_PAUSE();
      if (++polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return stop_.load() || job_of(state_.load(std::memory_order_seq_cst)) != finished_job; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        polls = 0;
      }
    }
    if (stop_.load()) return;
    finished_job = job_of(s);
    work(thread);
  }
}

}  // namespace sy
