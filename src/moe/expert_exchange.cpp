#include "moe/expert_exchange.h"

#include <cstring>

#include "base/error.h"

namespace sy {

int expert_owner(int e, int n_expert, int ranks) {
  // Rank r owns experts [r * n / R, (r + 1) * n / R) (floor): the largest r whose range
  // starts at or before e.
  return static_cast<int>(((static_cast<int64_t>(e) + 1) * ranks - 1) / n_expert);
}

void ExpertExchange::dispatch(Communicator& comm, const DispatchPlan& plan, const float* rows, int64_t d) {
  const int R = comm.size(), me = comm.rank(), E = plan.n_expert;
  // This rank's experts: [first, last), the range expert_owner() inverts.
  const int first = static_cast<int>(int64_t{me} * E / R), last = static_cast<int>(int64_t{me + 1} * E / R);
  // Who sends how many rows to which expert: every rank's per-expert counts.
  mine_.resize(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) mine_[e] = plan.rows(e);
  counts_.resize(static_cast<size_t>(R) * E);
  comm.all_gather(mine_.data(), E * sizeof(int64_t), counts_.data());
  auto count = [&](int q, int e) { return counts_[static_cast<size_t>(q) * E + e]; };

  send_counts_.assign(R, 0);
  recv_counts_.assign(R, 0);
  for (int e = 0; e < E; ++e) send_counts_[expert_owner(e, E, R)] += mine_[e];
  for (int q = 0; q < R; ++q)
    for (int e = first; e < last; ++e) recv_counts_[q] += count(q, e);
  int64_t n_recv = 0;
  for (int64_t c : recv_counts_) n_recv += c;
  exchanged_.resize(static_cast<size_t>(n_recv * d));
  // The plan's rows are expert-major and owners hold contiguous expert ranges, so the rows
  // for each rank are already contiguous and in rank order.
  comm.all_to_all_v(rows, send_counts_, exchanged_.data(), recv_counts_, d * sizeof(float));

  // Rank-major (within a rank: expert-major) -> expert-major (within an expert: rank order).
  local_offset_.assign(static_cast<size_t>(E) + 1, 0);
  active_.clear();
  for (int e = 0; e < E; ++e) {
    int64_t n = 0;
    if (e >= first && e < last)
      for (int q = 0; q < R; ++q) n += count(q, e);
    local_offset_[e + 1] = local_offset_[e] + n;
    if (n > 0) active_.push_back(e);
  }
  perm_.resize(static_cast<size_t>(n_recv));
  fill_.assign(local_offset_.begin(), local_offset_.end() - 1);
  int64_t i = 0;
  for (int q = 0; q < R; ++q)
    for (int e = first; e < last; ++e)
      for (int64_t k = 0; k < count(q, e); ++k) perm_[i++] = fill_[e]++;
  local_.resize(exchanged_.size());
  for (int64_t r = 0; r < n_recv; ++r)
    std::memcpy(local_.data() + perm_[r] * d, exchanged_.data() + r * d, d * sizeof(float));
}

void ExpertExchange::combine(Communicator& comm, const float* local_out, float* out, int64_t d) {
  const int64_t n = static_cast<int64_t>(perm_.size());
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(exchanged_.data() + r * d, local_out + perm_[r] * d, d * sizeof(float));
  // The way back: what each rank sent is what it gets.
  comm.all_to_all_v(exchanged_.data(), recv_counts_, out, send_counts_, d * sizeof(float));
}

}  // namespace sy
