// The thread pool's opt-in job profile: sites named after the code that starts the jobs,
// each job's wall time, the threads' busy time inside it and the serial time before it.
#include "base/job_profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/thread_pool.h"

namespace sy {
namespace {

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Two jobs started from two places in one function.
void two_sleeping_jobs(ThreadPool& pool, int tasks, int ms) {
  pool.parallel_for(tasks, [&](int64_t, int) { sleep_ms(ms); });
  pool.parallel_for(1, [&](int64_t, int) {});
}

const JobProfile::Site* find(const std::vector<JobProfile::Site>& sites, const std::string& name) {
  for (const auto& s : sites) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(JobProfile, NamesTheFunctionThatStartedTheJob) {
  EXPECT_EQ(job_site_name(
                "void sy::ThreadPool::parallel_for(int64_t, F&&) [with F = sy::GroupedFfn::run(const "
                "std::vector<sy::FfnJob>&, sy::cpu::Rows, sy::cpu::OutRows, sy::ThreadPool&)::<lambda(long "
                "int, int)>&; int64_t = long int]"),
            "GroupedFfn::run");
  EXPECT_EQ(
      job_site_name(
          "void sy::ThreadPool::parallel_for(int64_t, F&&) [with F = sy::cpu::(anonymous "
          "namespace)::attend_rows(const float*, long int)::<lambda(long int, int)>; int64_t = long int]"),
      "attend_rows");
  // Not a lambda: the type's name.
  EXPECT_EQ(
      job_site_name(
          "void sy::ThreadPool::parallel_for(int64_t, F&&) [with F = sy::Functor&; int64_t = long int]"),
      "Functor&");
}

TEST(JobProfile, TimesJobsThreadsAndTheSerialTimeBetween) {
  ThreadPool pool(2);
  JobProfile profile(pool.size());
  profile.begin_window();
  pool.set_profile(&profile);
  sleep_ms(3);  // serial time before the first job
  two_sleeping_jobs(pool, 4, 2);
  pool.set_profile(nullptr);
  two_sleeping_jobs(pool, 4, 2);  // not recorded

  const auto sites = profile.sites();
  ASSERT_EQ(sites.size(), 2u);
  const JobProfile::Site* sleeping = find(sites, "two_sleeping_jobs");
  const JobProfile::Site* empty = find(sites, "two_sleeping_jobs #2");
  ASSERT_NE(sleeping, nullptr);
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(sleeping->name, sites[0].name) << "most wall time first";
  EXPECT_EQ(sleeping->jobs, 1);
  EXPECT_EQ(sleeping->tasks, 4);
  EXPECT_EQ(empty->jobs, 1);
  EXPECT_EQ(empty->tasks, 1);
  EXPECT_GE(sleeping->serial_before_s, 0.003);
  // 4 tasks of 2 ms on 2 threads: at least 4 ms of wall time, 8 ms inside tasks in all,
  // and no thread busier than the job was long.
  EXPECT_GE(sleeping->wall_s, 0.004);
  ASSERT_EQ(sleeping->busy_s.size(), 2u);
  EXPECT_GE(sleeping->busy_s[0] + sleeping->busy_s[1], 0.008);
  for (double b : sleeping->busy_s) EXPECT_LE(b, sleeping->wall_s + 1e-4);
}

TEST(JobProfile, ASingleThreadRunsJobsInlineAndStillCountsThem) {
  ThreadPool pool(1);
  JobProfile profile(pool.size());
  profile.begin_window();
  pool.set_profile(&profile);
  two_sleeping_jobs(pool, 3, 1);
  pool.set_profile(nullptr);
  const auto sites = profile.sites();
  const JobProfile::Site* sleeping = find(sites, "two_sleeping_jobs");
  ASSERT_NE(sleeping, nullptr);
  EXPECT_EQ(sleeping->tasks, 3);
  EXPECT_GE(sleeping->busy_s[0], 0.003);
  EXPECT_LE(sleeping->busy_s[0], sleeping->wall_s + 1e-4);
}

}  // namespace
}  // namespace sy
