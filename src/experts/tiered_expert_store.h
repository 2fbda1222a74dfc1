// Expert buffering ("Towards MoE Deployment"): only a budget of experts stays in RAM, in
// preallocated slots; the others are read from the GGUF file on demand with direct I/O
// (the CPU's slow tier is the disk; the CUDA backend will put GPU memory over host
// memory behind the same interface). Which expert to evict is an EvictionPolicy
// (experts/cache_policy.h). Non-expert weights stay resident.
//
// Per MoE layer the store first pins the experts the step needs that are resident (they
// run at once) and starts loading the missing ones on I/O threads, so loads overlap the
// resident experts' compute; predicted experts of the next layer can be prefetched too.
// Outputs are bit-identical to the all-resident store: the same bytes, packed the same way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/weight_arena.h"
#include "experts/cache_policy.h"
#include "experts/direct_reader.h"
#include "experts/expert_store.h"

namespace sy {

class GgufFile;
struct HParams;

struct TieredStoreOptions {
  size_t budget_bytes = 0;        // RAM for resident experts
  std::string policy = kDefaultCachePolicy;
  int io_threads = 8;  // random ~1 MiB O_DIRECT reads here: 12 in flight read 1.3-1.5x faster than 4
  std::string profile;            // trace whose hottest experts are pinned (how many: experts/profile_pins.h)
  bool predictive_prefetch = true;
  int prefetch_layers = 0;  // MoE layers ahead to predict and load; 0: auto_prefetch_layers()
  // Each I/O thread's bounce buffer (DirectReader): reads land in it and are copied into
  // their slot; 0 reads straight into the slots.
  size_t bounce_bytes = size_t{2} << 20;
};

// Prefetch depth for a store that reads `expert_reads_per_layer` experts a MoE layer on
// average with `io_threads` I/O threads: 1 when a layer's own reads fill the threads,
// else 2 or 3 layers (see the .cpp for the figures).
int prefetch_layers_for(double expert_reads_per_layer, int io_threads);

// Prefetch depth before any layer has run, for a cache of budget_bytes out of all_bytes:
// 2 layers ahead once the cache holds two thirds of the experts (few misses per layer, so
// one layer of lead left the disk idle: +2 to +24% tokens/s at 75% in six interleaved pairs
// on olmoe Q4_0), else 1 (at 25%, loading two layers ahead evicts experts still needed: -3%).
int auto_prefetch_layers(size_t budget_bytes, size_t all_bytes);

// Parses an --expert-cache value: bytes ("123456"), with a unit ("512MB", "2GB", "1.5GiB"),
// or a fraction of all expert bytes ("0.25", "25%"). Throws sy::Error naming the flag.
size_t parse_expert_cache_size(const std::string& s, size_t all_expert_bytes);

// What to tell the user when under half of the slots' memory got huge pages (`fraction`,
// -1 when unknown; `thp_mode` as transparent_huge_page_mode() reads it): the fix that
// applies to that mode. Empty when there is nothing to say.
std::string slot_huge_page_warning(double fraction, const std::string& thp_mode);

struct ExpertStoreStats {
  int64_t hits = 0;            // needed experts that were resident when their layer came
  int64_t misses = 0;
  int64_t prefetch_issued = 0;
  int64_t prefetch_used = 0;   // prefetched experts that the next layer needed
  int64_t bytes_read = 0;
  double read_seconds = 0;     // I/O jobs' time (read and repack), summed over loads (they overlap)
  double pack_seconds = 0;     // of which repacking into the kernels' layout
  double wait_seconds = 0;     // time the compute thread waited for loads
  int64_t loads = 0;
  // Prefetched experts that were used: their loads' latency (issue to ready) summed, and
  // how much of it the compute still waited for. The difference is the miss latency that
  // prefetching hid.
  double prefetch_latency_seconds = 0;
  double prefetch_wait_seconds = 0;
};

class TieredExpertStore : public ExpertStore {
 public:
  TieredExpertStore(const GgufFile& f, const HParams& hp, const TieredStoreOptions& opt);
  ~TieredExpertStore() override;

  void plan_layer(int layer, const std::vector<int32_t>& experts, const std::vector<int64_t>& tokens,
                  std::vector<std::vector<int32_t>>& groups) override;
  const FfnWeights& acquire(int layer, int expert) override;
  void release(int layer, int expert) override;
  void prefetch(int layer, const std::vector<int32_t>& experts) override;
  void begin_step() override;
  size_t expert_bytes(int layer, int expert) const override;

  int capacity() const { return static_cast<int>(slots_.size()); }
  // A copy taken under the store's lock: other threads (/metrics) may read it while loads run.
  ExpertStoreStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  const std::string& policy_name() const { return policy_name_; }
  // The prefetch depth for the misses the layers have been seeing (prefetch_layers_for),
  // set as each layer is planned; until then the options' prefetch_layers.
  int suggested_prefetch_layers() const { return suggested_layers_.load(std::memory_order_relaxed); }
  // The moving average behind it: experts a planned layer needed read (-1 before any).
  double reads_per_layer() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_per_layer_;
  }
  // Experts pinned from --expert-profile, per MoE layer (empty without a profile).
  const std::vector<int>& profile_pins() const { return profile_pins_; }
  bool direct_io() const { return reader_->direct(); }
  int io_threads() const { return reader_->threads(); }
  size_t bounce_bytes() const { return reader_->bounce_bytes(); }  // 0: reads land in the slots
  ReadStats read_stats() const { return reader_->stats(); }
  // The share of the slots' memory on huge pages (-1: unknown; see huge_page_fraction).
  double slot_huge_page_fraction() const { return huge_page_fraction(arena_.chunks()); }
  // Every read a miss can issue: each expert matrix's place in the file (for a probe of
  // the disk under the store's own pattern).
  std::vector<FileRange> expert_reads() const;

 private:
  struct Source {             // where a unit's three matrices are in the file
    WeightMatrix m[3];        // gate, up, down; data = null
    uint64_t offset[3];
  };
  enum class State { Empty, Loading, Ready, Failed };
  struct Slot {
    uint8_t* buf[3] = {};
    int unit = -1;
    State state = State::Empty;
    int pins = 0;
    bool permanent = false;
    int parts_left = 0;  // tensors still loading
    double issued_at = 0, ready_at = 0;  // the last load's start and end (seconds)
    bool prefetch_use = false;  // planned as a use of a prefetched load: its latency counts once
    FfnWeights w;
    std::string error;
  };

  // Neither in use by the running layer nor still loading.
  static bool evictable(const Slot& s) { return s.pins == 0 && s.state != State::Loading; }
  bool can_evict(int unit) const { return slot_of_[unit] >= 0 && evictable(slots_[slot_of_[unit]]) && !shielded_[unit]; }
  int unit_of(int layer, int expert) const;
  // A slot for `unit`, evicting the policy's victim if the layer is full; `tokens` is the
  // use it is claimed for (0: a prefetch). -1 when every slot of the layer is pinned.
  int claim_slot(int unit, double tokens);
  enum class Load { Now, Urgent, Background };  // on this thread; I/O threads, first or last
  // Call with mu_ held; Load::Now releases it while reading.
  void start_load(int slot, Load how);
  // Reads and packs tensor i (gate, up, down) of the slot's expert (adding the packing's
  // time to pack_seconds); false on error.
  bool load_part(int slot, int i, WeightMatrix& out, double& pack_seconds);
  void finish_part(int slot, double seconds, double pack_seconds);
  // Waits until the slot's load is done; returns the seconds the load kept the caller
  // waiting (to the load's ready time: the thread's wake-up delay after it is not the
  // load's latency).
  double wait_ready(int slot, std::unique_lock<std::mutex>& lock);
  void pin_profile(const std::string& path, const std::string& policy);
  // Call with mu_ held, once per planned layer, with the experts it needed read.
  void note_layer_reads(double reads);

  const HParams& hp_;
  std::vector<int> moe_index_;  // layer -> MoE layer index or -1
  int n_expert_;
  std::vector<Source> sources_;
  std::unique_ptr<DirectReader> reader_;
  WeightArena arena_;
  std::vector<Slot> slots_;
  std::vector<int> slot_of_;     // unit -> slot, -1 when not resident
  std::vector<uint8_t> planned_, prefetched_;
  std::vector<uint8_t> shielded_;  // predicted for the layer a prefetch is filling: not a victim
  std::vector<double> deferred_tokens_;  // tokens of an expert plan_layer deferred (0: none)
  std::unique_ptr<ExpertCache> cache_;
  std::string policy_name_;
  int pinned_ = 0;               // slots with pins > 0
  double reads_per_layer_ = -1;  // moving average of the experts a planned layer needed read (-1: none yet)
  std::atomic<int> suggested_layers_{1};
  std::vector<int> profile_pins_;
  int per_layer_ = 0;            // slots per MoE layer
  std::vector<int> resident_in_layer_;
  int used_slots_ = 0;
  std::vector<int> plan_units_;  // plan_layer's scratch
  std::vector<int32_t> plan_hits_, plan_loading_, plan_deferred_;

  mutable std::mutex mu_;
  std::condition_variable ready_;
  ExpertStoreStats stats_;
};

}  // namespace sy
