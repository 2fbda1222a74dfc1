// The collectives behind expert parallelism: the single-process communicator, and N ranks
// as threads (InProcessGroup), on hand-made data whose results are worked out below.
#include "parallel/communicator.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "base/error.h"
#include "moe/expert_exchange.h"
#include "parallel/in_process_group.h"

namespace sy {
namespace {

TEST(Communicator, LocalIsOneRank) {
  LocalCommunicator c;
  EXPECT_EQ(c.size(), 1);
  std::vector<float> send = {1, 2, 3, 4}, recv(4);
  c.all_to_all_v(send.data(), {2}, recv.data(), {2}, 2 * sizeof(float));
  EXPECT_EQ(recv, send);
  EXPECT_THROW(c.all_to_all_v(send.data(), {2}, recv.data(), {1}, sizeof(float)), Error);
  c.all_reduce_sum(send.data(), 4);
  EXPECT_EQ(send, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_THROW(c.broadcast(send.data(), 4, 1), Error);
}

// Rank r sends (q + 1) items to rank q, each item = 100 * r + q: rank q receives, in rank
// order, q + 1 copies of 100 * r + q from every rank r.
TEST(Communicator, InProcessAllToAllV) {
  InProcessGroup g(3);
  std::vector<std::vector<int32_t>> got(3);
  g.run([&](Communicator& c) {
    const int r = c.rank();
    std::vector<int32_t> send;
    std::vector<int64_t> sc, rc;
    for (int q = 0; q < 3; ++q) {
      for (int i = 0; i <= q; ++i) send.push_back(100 * r + q);
      sc.push_back(q + 1);
      rc.push_back(r + 1);
    }
    std::vector<int32_t> recv(3 * (r + 1));
    c.all_to_all_v(send.data(), sc, recv.data(), rc, sizeof(int32_t));
    got[r] = recv;
  });
  for (int q = 0; q < 3; ++q) {
    std::vector<int32_t> want;
    for (int r = 0; r < 3; ++r)
      for (int i = 0; i <= q; ++i) want.push_back(100 * r + q);
    EXPECT_EQ(got[q], want) << "rank " << q;
  }
}

TEST(Communicator, InProcessReduceGatherBroadcast) {
  InProcessGroup g(4);
  std::vector<std::vector<float>> sums(4), gathered(4), bcast(4);
  g.run([&](Communicator& c) {
    const int r = c.rank();
    std::vector<float> v(7);
    for (int i = 0; i < 7; ++i) v[i] = static_cast<float>(r * 10 + i);
    c.all_reduce_sum(v.data(), 7);
    sums[r] = v;
    const float mine[2] = {static_cast<float>(r), static_cast<float>(-r)};
    std::vector<float> all(8);
    c.all_gather(mine, sizeof(mine), all.data());
    gathered[r] = all;
    std::vector<float> b = {static_cast<float>(r), 0.5f};
    c.broadcast(b.data(), 2 * sizeof(float), 2);
    bcast[r] = b;
    c.barrier();
  });
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 7; ++i) EXPECT_EQ(sums[r][i], 60.0f + 4 * i);  // (0+10+20+30) + 4i
    EXPECT_EQ(gathered[r], (std::vector<float>{0, 0, 1, -1, 2, -2, 3, -3}));
    EXPECT_EQ(bcast[r], (std::vector<float>{2, 0.5f}));
  }
}

// One rank's error aborts the group (an MPI job aborts): the others do not wait for the
// failed rank (their next collective throws), and the error that reaches the caller is the
// failed rank's own, not the abort the others saw. The failed rank throws only once the
// others are done with its buffers, which its unwinding frees.
TEST(Communicator, InProcessErrorAbortsEveryRank) {
  InProcessGroup g(3);
  std::vector<std::string> stopped_in(3);
  try {
    g.run([&](Communicator& c) {
      const int r = c.rank();
      std::vector<int32_t> send(3, r), recv(3);
      // Rank 1 expects two items from rank 0, which sends it one.
      std::vector<int64_t> rc = {r == 1 ? 2 : 1, 1, 1};
      try {
        c.all_to_all_v(send.data(), {1, 1, 1}, recv.data(), rc, sizeof(int32_t));
      } catch (const Error&) {
        stopped_in[r] = "all_to_all_v";
        throw;
      }
      try {
        c.barrier();
      } catch (const Error&) {
        stopped_in[r] = "barrier";
        throw;
      }
    });
    FAIL() << "a rank's error must reach the caller";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1: all_to_all_v: rank 0 sends 1 items to rank 1, which expects 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(stopped_in, (std::vector<std::string>{"barrier", "all_to_all_v", "barrier"}));
  // The group stays aborted: a later collective throws at once instead of waiting.
  EXPECT_THROW(g.rank(0).barrier(), Error);
}

// A rank that fails outside any collective (its model threw) must not leave the others
// waiting in their next one.
TEST(Communicator, InProcessRankThatDiesAbortsTheOthers) {
  InProcessGroup g(2);
  EXPECT_THROW(g.run([&](Communicator& c) {
    if (c.rank() == 0) throw std::runtime_error("rank 0 could not load its model");
    c.barrier();
  }),
               std::runtime_error);
}

// Contiguous expert ranges: 16 experts over 3 ranks -> [0,5) [5,10) [10,16); more ranks
// than experts leaves some ranks without one.
TEST(Communicator, ExpertOwnersAreContiguousRanges) {
  std::vector<int> own;
  for (int e = 0; e < 16; ++e) own.push_back(expert_owner(e, 16, 3));
  EXPECT_EQ(own, (std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(expert_owner(0, 2, 3), 1);
  EXPECT_EQ(expert_owner(1, 2, 3), 2);
  for (int e = 0; e < 8; ++e) EXPECT_EQ(expert_owner(e, 8, 1), 0);
}

}  // namespace
}  // namespace sy
