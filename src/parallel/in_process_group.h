// N ranks as threads of one process, sharing memory: a real Communicator (every
// collective moves data between the ranks' own buffers) for testing multi-rank code
// without MPI. Rank r's communicator is group.rank(r); each rank runs on its own thread and
// all of them must call the same collectives in the same order.
//
// A rank that fails aborts the group, as MPI's default error handler does: every rank
// waiting in a collective, and every later collective, throws instead of waiting forever
// for the failed one.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace sy {

class InProcessGroup {
 public:
  explicit InProcessGroup(int n_ranks);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r);

  // Runs body(rank r's communicator) on one thread per rank and waits for all of them. A
  // rank that throws aborts the group; the first error is rethrown here once every rank
  // has stopped.
  void run(const std::function<void(Communicator&)>& body);

  // Wakes every rank waiting in a collective with an error naming `why`; later
  // collectives throw it too.
  void abort(const std::string& why);

 private:
  class Rank;
  // What each rank posts for the collective in progress: the others read it between two
  // barriers, so a rank's buffers stay valid until everyone has copied.
  struct Post {
    const void* send = nullptr;
    void* recv = nullptr;
    const std::vector<int64_t>* send_counts = nullptr;
  };
  void arrive_and_wait();

  std::vector<Post> posts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string aborted_;  // why the group was aborted; empty while it runs
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace sy
