// N ranks as threads of one process, sharing memory: a real Communicator (every
// collective moves data between the ranks' own buffers) for testing multi-rank code
// without MPI. Rank r's communicator is group.rank(r); each rank runs on its own thread and
// all of them must call the same collectives in the same order.
#pragma once

#include <barrier>
#include <memory>
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

 private:
  class Rank;
  // What each rank posts for the collective in progress: the others read it between two
  // barriers, so a rank's buffers stay valid until everyone has copied.
  struct Post {
    const void* send = nullptr;
    void* recv = nullptr;
    const std::vector<int64_t>* send_counts = nullptr;
  };
  std::vector<Post> posts_;
  std::barrier<> sync_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace sy
