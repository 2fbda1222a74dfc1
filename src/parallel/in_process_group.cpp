#include "parallel/in_process_group.h"

#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "base/error.h"

namespace sy {
namespace {

// What a rank gets when another rank aborted the group.
struct CollectiveAborted : Error {
  explicit CollectiveAborted(const std::string& why) : Error("collective aborted: " + why) {}
};

}  // namespace

class InProcessGroup::Rank : public Communicator {
 public:
  Rank(InProcessGroup& g, int r) : g_(g), r_(r) {}
  int rank() const override { return r_; }
  int size() const override { return g_.size(); }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    post({send, recv, nullptr});
    for (int q = 0; q < size(); ++q)
      std::memcpy(static_cast<uint8_t*>(recv) + q * bytes, g_.posts_[q].send, bytes);
    g_.arrive_and_wait();
  }

  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, size_t item_bytes) override {
    if (static_cast<int>(send_counts.size()) != size() || static_cast<int>(recv_counts.size()) != size())
      fail("all_to_all_v: needs one send and one receive count per rank (" + std::to_string(size()) + ")");
    post({send, recv, &send_counts});
    auto* out = static_cast<uint8_t*>(recv);
    std::string mismatch;
    for (int q = 0; q < size(); ++q) {
      // Rank q's items for this rank start after what q sends to lower ranks.
      const std::vector<int64_t>& qc = *g_.posts_[q].send_counts;
      int64_t skip = 0;
      for (int i = 0; i < r_; ++i) skip += qc[i];
      if (qc[r_] != recv_counts[q]) {
        if (mismatch.empty())
          mismatch = "all_to_all_v: rank " + std::to_string(q) + " sends " + std::to_string(qc[r_]) +
                     " items to rank " + std::to_string(r_) + ", which expects " + std::to_string(recv_counts[q]);
        continue;
      }
      const size_t n = static_cast<size_t>(qc[r_]) * item_bytes;
      std::memcpy(out, static_cast<const uint8_t*>(g_.posts_[q].send) + skip * item_bytes, n);
      out += n;
    }
    // Failed only once every rank is done with every buffer, this one's included: the others
    // still read from it until the barrier. They learn of it at their next collective.
    g_.arrive_and_wait();
    if (!mismatch.empty()) fail(mismatch);
  }

  void all_reduce_sum(float* data, int64_t n) override {
    post({nullptr, data, nullptr});
    // Each rank sums its slice of the elements over all ranks, then, once every rank has
    // read the inputs, writes that slice into every rank's buffer.
    const int64_t lo = n * r_ / size(), hi = n * (r_ + 1) / size();
    scratch_.assign(static_cast<size_t>(hi - lo), 0.0f);
    for (int q = 0; q < size(); ++q) {
      const auto* v = static_cast<const float*>(g_.posts_[q].recv);
      for (int64_t i = lo; i < hi; ++i) scratch_[i - lo] += v[i];
    }
    g_.arrive_and_wait();  // everyone has read the inputs
    for (int q = 0; q < size(); ++q)
      std::memcpy(static_cast<float*>(g_.posts_[q].recv) + lo, scratch_.data(), (hi - lo) * sizeof(float));
    g_.arrive_and_wait();
  }

  void broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size()) fail("broadcast: root " + std::to_string(root) + " does not exist");
    post({data, data, nullptr});
    if (r_ != root) std::memcpy(data, g_.posts_[root].send, bytes);
    g_.arrive_and_wait();
  }

  void barrier() override { g_.arrive_and_wait(); }

 private:
  // A rank that finds an error aborts the group first, so the others do not wait for it.
  [[noreturn]] void fail(const std::string& what) {
    const std::string msg = "rank " + std::to_string(r_) + ": " + what;
    g_.abort(msg);
    throw Error(msg);
  }

  void post(const Post& p) {
    g_.posts_[r_] = p;
    g_.arrive_and_wait();  // every rank's post is visible
  }

  InProcessGroup& g_;
  int r_;
  std::vector<float> scratch_;
};

InProcessGroup::InProcessGroup(int n_ranks) : posts_(n_ranks > 0 ? n_ranks : 0) {
  if (n_ranks < 1) throw Error("InProcessGroup: needs at least one rank");
  for (int r = 0; r < n_ranks; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::rank(int r) {
  return *ranks_.at(static_cast<size_t>(r));
}

void InProcessGroup::arrive_and_wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!aborted_.empty()) throw CollectiveAborted(aborted_);
  const uint64_t gen = generation_;
  if (++arrived_ == size()) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || !aborted_.empty(); });
  if (generation_ == gen) throw CollectiveAborted(aborted_);
}

void InProcessGroup::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = why.empty() ? "aborted" : why;
  }
  cv_.notify_all();
}

void InProcessGroup::run(const std::function<void(Communicator&)>& body) {
  std::vector<std::exception_ptr> errors(ranks_.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(rank(r));
      } catch (...) {
        errors[r] = std::current_exception();
        abort("rank " + std::to_string(r) + " failed: " + message_of(errors[r], "an unknown exception"));
      }
    });
  }
  for (auto& t : threads) t.join();
  // The rank that failed is the one to report, not the ranks its abort woke.
  std::exception_ptr first;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CollectiveAborted&) {
      if (!first) first = e;
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace sy
