// Where a thread pool's time goes, job by job: an opt-in recorder (`bench --job-profile`)
// that times every job a pool runs (wall time from its start to the end of its last
// task, and each thread's time inside its tasks) and the serial time the calling thread
// spends between jobs, grouped by the code that started the job. While no profile is
// attached the pool times nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sy {

class JobProfile {
 public:
  // The jobs started from one place (a parallel_for call site), summed.
  struct Site {
    std::string name;  // the function that started the jobs, e.g. "GroupedFfn::run"
    int64_t jobs = 0, tasks = 0;
    double wall_s = 0;           // from each job's start to the end of its last task
    double serial_before_s = 0;  // the caller's time since the previous job ended
    std::vector<double> busy_s;  // per thread: time inside the jobs' tasks
  };

  explicit JobProfile(int threads);

  // Starts (or restarts) the clock for the serial time before the next job: call where a
  // measured window (a forward step) begins, so the time outside it is not counted.
  void begin_window();
  // The sites, most wall time first.
  std::vector<Site> sites() const;

  // Called by ThreadPool. A site is told apart by `key` (one per parallel_for
  // instantiation: its task trampoline) and named by `pretty` (that instantiation's
  // __PRETTY_FUNCTION__, which names the caller's lambda; two lambdas of one function
  // may share the string).
  using Clock = std::chrono::steady_clock;
  struct JobStart {
    Clock::time_point t;
    std::vector<int64_t> busy_ns;  // each thread's total at the start
    size_t site = 0;               // index in raw_, found once per job
  };
  JobStart job_started(const void* key, const char* pretty);
  void job_ended(int64_t tasks, const JobStart& start);
  void add_busy(int thread, Clock::duration d) {
    busy_ns_[static_cast<size_t>(thread)].fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(), std::memory_order_relaxed);
  }

 private:
  struct Raw {
    const void* key;
    const char* pretty;
    Site sum;
  };
  size_t site_index(const void* key, const char* pretty);

  std::vector<std::atomic<int64_t>> busy_ns_;
  std::vector<Raw> raw_;  // few sites: a linear search by pointer
  Clock::time_point last_end_;
  bool in_window_ = false;
};

// "GroupedFfn::run" from a parallel_for's __PRETTY_FUNCTION__ ("void sy::ThreadPool::
// parallel_for(int64_t, F&&) [with F = sy::GroupedFfn::run(...)::<lambda(long int, int)>&;
// ...]"): the function whose lambda F is, without namespaces and parameters.
std::string job_site_name(const char* pretty_function);

}  // namespace sy
