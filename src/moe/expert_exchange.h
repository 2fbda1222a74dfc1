// Expert parallelism for one MoE layer: experts are split over the ranks of a Communicator
// (contiguous ranges), every rank routes its own tokens, and each expert's block of
// gathered rows travels to the rank that owns the expert, runs there once over the rows of
// all ranks, and comes back. Two variable-size all-to-alls per layer (DeepSpeed-MoE's
// dispatch and combine); a rank with one expert's rows from several ranks runs that expert
// once over all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/dispatch_plan.h"
#include "parallel/communicator.h"

namespace sy {

// The rank that owns expert e when n_expert experts are split over `ranks` ranks in
// contiguous ranges of (nearly) equal size.
int expert_owner(int e, int n_expert, int ranks);

class ExpertExchange {
 public:
  // Sends the plan's gathered rows (expert-major, d floats each) to the experts' owners and
  // receives this rank's experts' rows from everyone, arranged expert-major.
  void dispatch(Communicator& comm, const DispatchPlan& plan, const float* rows, int64_t d);
  // This rank's experts that received rows (ascending), their row counts, and the rows.
  const std::vector<int32_t>& active() const { return active_; }
  const std::vector<int64_t>& offsets() const { return local_offset_; }  // per expert, n_expert + 1
  int64_t rows(int e) const { return local_offset_[e + 1] - local_offset_[e]; }
  int64_t n_rows() const { return local_offset_.empty() ? 0 : local_offset_.back(); }
  const float* local_rows() const { return local_.data(); }
  // Sends the results of local_rows() (same layout) back to the ranks the rows came from;
  // out receives this rank's rows' results in the plan's order.
  void combine(Communicator& comm, const float* local_out, float* out, int64_t d);

 private:
  std::vector<int64_t> mine_;                       // per expert: this rank's rows
  std::vector<int64_t> counts_;                     // [rank][expert]: rows each rank routes to each expert
  std::vector<int64_t> send_counts_, recv_counts_;  // rows per rank, this layer
  std::vector<int64_t> local_offset_;               // per expert (n_expert + 1): rows of this rank's experts
  std::vector<int64_t> perm_;                       // received row i (rank-major) -> its local row
  std::vector<int64_t> fill_;                       // scratch: next free local row per expert
  std::vector<int32_t> active_;
  // Rows in rank-major order: received by dispatch, then reused for the results combine
  // sends back (same counts, same order).
  std::vector<float> exchanged_, local_;
};

}  // namespace sy
