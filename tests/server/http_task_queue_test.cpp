// The HTTP worker pool: connections beyond the running threads get threads of their own
// up to the limit, the rest wait for one; extra threads end once idle; shutdown runs what
// is queued.
#include "server/http_task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace sy {
namespace {

using namespace std::chrono_literals;

// Jobs that hold their thread until released, as an open connection does.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> started{0}, finished{0};
  std::function<void()> job() {
    return [this] {
      started++;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return open; });
      finished++;
    };
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

// Polls `done` for up to 10 s (the threads run on a loaded 2-core machine).
template <class Done>
bool eventually(Done&& done) {
  for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(10ms);
  return done();
}

TEST(ElasticTaskQueue, BlockedJobsGetNewThreadsUpToTheLimitThenWait) {
  Gate gate;
  ElasticTaskQueue q(1, 4, 10s);
  EXPECT_EQ(q.threads(), 1u);
  for (int i = 0; i < 6; ++i) q.enqueue(gate.job());
  EXPECT_TRUE(eventually([&] { return gate.started == 4; })) << gate.started;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(gate.started, 4) << "two jobs wait for a thread: four is the limit";
  EXPECT_EQ(q.threads(), 4u);
  gate.release();
  EXPECT_TRUE(eventually([&] { return gate.finished == 6; })) << gate.finished;
  EXPECT_EQ(q.peak_threads(), 4u);
}

TEST(ElasticTaskQueue, IdleExtraThreadsEndAndTheBaseStays) {
  Gate gate;
  ElasticTaskQueue q(2, 16, 50ms);
  for (int i = 0; i < 10; ++i) q.enqueue(gate.job());
  EXPECT_TRUE(eventually([&] { return gate.started == 10; })) << gate.started;
  EXPECT_GE(q.threads(), 10u);
  gate.release();
  EXPECT_TRUE(eventually([&] { return q.threads() == 2; })) << q.threads() << " threads still run";
  // The pool grows again for the next burst, and reaps the threads that ended.
  Gate again;
  for (int i = 0; i < 5; ++i) q.enqueue(again.job());
  EXPECT_TRUE(eventually([&] { return again.started == 5; })) << again.started;
  again.release();
  EXPECT_TRUE(eventually([&] { return again.finished == 5; }));
}

TEST(ElasticTaskQueue, ShutdownRunsWhatIsQueuedThenJoins) {
  std::atomic<int> ran{0};
  {
    ElasticTaskQueue q(1, 1, 10s);
    for (int i = 0; i < 20; ++i)
      q.enqueue([&] {
        std::this_thread::sleep_for(1ms);
        ran++;
      });
    q.shutdown();
    EXPECT_EQ(ran, 20);
    EXPECT_EQ(q.threads(), 0u);
    q.enqueue([&] { ran++; });  // after shutdown: dropped, as httplib never does this
  }
  EXPECT_EQ(ran, 20);
}

}  // namespace
}  // namespace sy
