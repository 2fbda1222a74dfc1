// ThreadPool::parallel_for_sized: small jobs run inline, small tasks are claimed in runs,
// and either way every task runs exactly once.
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

namespace sy {
namespace {

TEST(ThreadPool, SizedJobsRunEveryTaskOnce) {
  ThreadPool pool(2);
  // (tasks, floats): inline (under 64K floats), one task per claim (each task moves 64K
  // floats), runs of 16 with a short last run (131 tasks of 1000 floats), one claim for
  // all (each task moves 1 float but the job passes the inline threshold).
  const std::pair<int64_t, int64_t> cases[] = {{100, 1000}, {8, 8 << 16}, {131, 131000}, {70000, 70000}};
  for (const auto& [n, floats] : cases) {
    SCOPED_TRACE(testing::Message() << n << " tasks, " << floats << " floats");
    auto seen = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n));
    std::atomic<int> other_thread{0};
    const auto caller = std::this_thread::get_id();
    pool.parallel_for_sized(n, floats, [&](int64_t i, int) {
      seen[static_cast<size_t>(i)].fetch_add(1);
      if (std::this_thread::get_id() != caller) other_thread.store(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "task " << i;
    if (floats < (1 << 16)) {
      EXPECT_EQ(other_thread.load(), 0) << "a small job runs on the caller alone";
    }
  }
}

TEST(ThreadPool, SizedJobsAreProfiledUnderTheCallersName) {
  ThreadPool pool(2);
  JobProfile profile(pool.size());
  pool.set_profile(&profile);
  pool.parallel_for_sized(131, 131000, [](int64_t, int) {});
  pool.set_profile(nullptr);
  const auto sites = profile.sites();
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].name, "ThreadPool_SizedJobsAreProfiledUnderTheCallersName_Test::TestBody");
  EXPECT_EQ(sites[0].tasks, 9) << "131 tasks in runs of 16: 9 claims";
}

}  // namespace
}  // namespace sy
