// The collectives that expert parallelism needs, behind one narrow interface: the MoE layer
// calls these and does not know whether the ranks are this process alone, threads of one
// process (InProcessGroup, for tests) or, later, MPI processes and NCCL devices.
//
// Every rank must call the same collectives in the same order (the engine steps all ranks
// together); buffers are plain bytes so that any transport can move them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sy {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank's `bytes` bytes, in rank order, land in recv (size() * bytes) on every rank.
  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  // Variable-size all-to-all: send holds, in rank order, send_counts[r] items of item_bytes
  // for rank r; recv receives, in rank order, recv_counts[r] items from rank r. The counts
  // must agree pairwise (what r sends to q is what q expects from r).
  virtual void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                            const std::vector<int64_t>& recv_counts, size_t item_bytes) = 0;
  // data[i] = sum over ranks of data[i], on every rank.
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // Root's `bytes` bytes of data replace everyone's.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
};

// One process, one rank: every collective is a copy or nothing.
class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_gather(const void* send, size_t bytes, void* recv) override;
  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, size_t item_bytes) override;
  void all_reduce_sum(float*, int64_t) override {}
  void broadcast(void*, size_t, int root) override;
  void barrier() override {}
};

}  // namespace sy
