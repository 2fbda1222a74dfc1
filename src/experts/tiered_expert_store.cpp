#include "experts/tiered_expert_store.h"

#include <algorithm>
#include <cmath>

#include "base/clock.h"
#include "base/error.h"
#include "base/huge_pages.h"
#include "base/memory_info.h"
#include "experts/profile_pins.h"
#include "experts/trace.h"
#include "formats/gguf_reader.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/weight_prep.h"
#include "model/hparams.h"

namespace sy {

size_t parse_expert_cache_size(const std::string& s, size_t all_expert_bytes) {
  const std::string err = "--expert-cache '" + s + "': expected bytes (1073741824), a size (512MB, 2GB) or a fraction of the experts (0.25, 25%)";
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw Error(err);
  }
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double bytes = 0;
  if (unit.empty()) bytes = v <= 1.0 ? v * static_cast<double>(all_expert_bytes) : v;
  else if (unit == "%") bytes = v / 100.0 * static_cast<double>(all_expert_bytes);
  else if (unit == "B") bytes = v;
  else if (unit == "K" || unit == "KB" || unit == "KIB") bytes = v * 1024;
  else if (unit == "M" || unit == "MB" || unit == "MIB") bytes = v * 1024 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") bytes = v * 1024 * 1024 * 1024;
  else throw Error(err);
  if (!(bytes > 0) || !std::isfinite(bytes)) throw Error(err);
  // A share above all of the experts is a typo, not a budget (a byte size may exceed them).
  if (unit == "%" && v > 100) throw Error("--expert-cache '" + s + "': a share of the experts is at most 100%");
  // A bare number above 1 counts bytes: "1.5" meant a share, and would leave one byte.
  if (unit.empty() && v > 1.0 && v != std::floor(v)) {
    throw Error("--expert-cache '" + s + "': a bare number above 1 is a byte count and must be whole; a share of the " +
                "experts is 0 to 1 (0.5) or a percentage (50%), a size takes a unit (1.5GB)");
  }
  // Past 2^63 the conversion to size_t is undefined; no machine has that much memory anyway.
  if (bytes >= 0x1p63) throw Error("--expert-cache '" + s + "': more bytes than any machine's memory");
  return static_cast<size_t>(bytes);
}

std::string slot_huge_page_warning(double fraction, const std::string& thp_mode) {
  if (fraction < 0 || fraction >= 0.5) return "";
  // Off: how to switch them on. On: the kernel found too few free 2 MiB blocks.
  const std::string fix = thp_mode == "never"
                              ? "enable them with 'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled' (as root)"
                              : "free some memory, or compact it with 'echo 1 > /proc/sys/vm/compact_memory' (as root), "
                                "and start again";
  return "only " + std::to_string(static_cast<int>(100 * fraction)) +
         "% of the expert cache's slots are on huge pages (transparent huge pages: " +
         (thp_mode.empty() ? "unknown" : thp_mode) +
         "); expert reads then go to the disk in 4 KiB segments, which virtio disks read up to 2x slower: " + fix;
}

TieredExpertStore::TieredExpertStore(const GgufFile& f, const HParams& hp, const TieredStoreOptions& opt)
    : hp_(hp), n_expert_(hp.n_expert) {
  int n_moe = 0;
  for (int il = 0; il < hp.n_layer; ++il) moe_index_.push_back(hp.layer_is_moe(il) ? n_moe++ : -1);
  const int64_t d = hp.n_embd, ff = hp.n_ff_exp;
  size_t unit_bytes = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (moe_index_[il] < 0) continue;
    const std::string p = "blk." + std::to_string(il) + ".";
    const char* names[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    const int64_t cols[3] = {d, d, ff}, rows[3] = {ff, ff, d};
    for (int e = 0; e < n_expert_; ++e) {
      Source s;
      for (int i = 0; i < 3; ++i) {
        const GgufTensorInfo* t = f.find_tensor(p + names[i]);
        if (!t) throw Error(f.path() + ": --expert-cache needs the 3-D expert tensors (missing '" + p + names[i] + "')");
        if (t->shape != std::vector<int64_t>{cols[i], rows[i], n_expert_}) throw Error(f.path() + ": tensor '" + t->name + "' has an unexpected shape");
        s.m[i] = WeightMatrix{t->dtype, rows[i], cols[i], nullptr, t->name, t->packed};
        s.offset[i] = f.data_offset() + t->offset + s.m[i].bytes() * static_cast<size_t>(e);
      }
      unit_bytes = std::max(unit_bytes, s.m[0].bytes() + s.m[1].bytes() + s.m[2].bytes());
      sources_.push_back(s);
    }
  }
  const int n_units = static_cast<int>(sources_.size());
  // One pool per MoE layer (the analysis of real traces found per-layer pools with a
  // batch-aware policy closest to Belady's MIN; docs/expert-buffering.md).
  const int64_t fits = static_cast<int64_t>(opt.budget_bytes / std::max<size_t>(1, unit_bytes));
  per_layer_ = static_cast<int>(std::min<int64_t>(n_expert_, fits / n_moe));
  if (per_layer_ < 1) {
    throw Error("--expert-cache " + std::to_string(opt.budget_bytes) + " bytes holds " + std::to_string(fits) +
                " experts; it needs at least one per MoE layer (" + std::to_string(n_moe) + " x " +
                std::to_string(unit_bytes) + " bytes)");
  }
  const int64_t cap = int64_t{per_layer_} * n_moe;
  // A slot's buffer for each of the three matrices (room for direct I/O's alignment).
  size_t span[3], slot_bytes = 0;
  for (int i = 0; i < 3; ++i) slot_bytes += span[i] = DirectReader::span_bytes(sources_[0].m[i].bytes());
  // The slots are faulted in below: more than the machine (or the cgroup) has would end in
  // the OOM killer, not in an error.
  require_available_memory(static_cast<size_t>(cap) * slot_bytes,
                           "--expert-cache (" + std::to_string(cap) + " expert slots)",
                           "give a smaller --expert-cache");
  reader_ = std::make_unique<DirectReader>(f.path(), opt.io_threads, opt.bounce_bytes);
  suggested_layers_.store(opt.prefetch_layers, std::memory_order_relaxed);
  slots_.resize(static_cast<size_t>(cap));
  for (Slot& s : slots_) {
    for (int i = 0; i < 3; ++i) {
      s.buf[i] = arena_.allocate(span[i], DirectReader::kAlign);
      // Fault the pages in now: a first load into a fresh slot would otherwise pay the
      // kernel's zeroing of its pages on the hot path.
      touch_pages(s.buf[i], span[i]);
    }
  }
  slot_of_.assign(n_units, -1);
  planned_.assign(n_units, 0);
  prefetched_.assign(n_units, 0);
  shielded_.assign(n_units, 0);
  deferred_tokens_.assign(n_units, 0.0);
  auto policy = make_policy(opt.policy, n_units);
  policy_name_ = policy->name();
  resident_in_layer_.assign(n_moe, 0);
  // The policy is never offered an expert in use, loading, or predicted by a prefetch.
  cache_ = std::make_unique<ExpertCache>(n_moe, n_expert_, CacheScope::PerLayer, per_layer_, std::move(policy),
                                         [this](int u) { return slot_of_[u] >= 0 && !can_evict(u); });
  if (!opt.profile.empty()) pin_profile(opt.profile, opt.policy);
}

std::vector<FileRange> TieredExpertStore::expert_reads() const {
  std::vector<FileRange> out;
  for (const Source& s : sources_) {
    for (int i = 0; i < 3; ++i) out.push_back({s.offset[i], s.m[i].bytes()});
  }
  return out;
}

TieredExpertStore::~TieredExpertStore() {
  // Loads still in flight write into slots: wait for them before the arena goes.
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] {
      return std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == State::Loading; });
    });
  }
  reader_.reset();  // joins the I/O threads before anything they touch goes away
}

int TieredExpertStore::unit_of(int layer, int expert) const {
  const int m = layer >= 0 && layer < static_cast<int>(moe_index_.size()) ? moe_index_[layer] : -1;
  if (m < 0 || expert < 0 || expert >= n_expert_) throw Error("expert store: layer " + std::to_string(layer) + " expert " + std::to_string(expert) + " does not exist");
  return m * n_expert_ + expert;
}

size_t TieredExpertStore::expert_bytes(int layer, int expert) const {
  const Source& s = sources_[unit_of(layer, expert)];
  return s.m[0].bytes() + s.m[1].bytes() + s.m[2].bytes();
}

int TieredExpertStore::claim_slot(int unit, double tokens) {
  const int layer = unit / n_expert_;
  if (resident_in_layer_[layer] == per_layer_) {
    bool any = false;
    for (int e = 0; e < n_expert_ && !any; ++e) {
      any = can_evict(layer * n_expert_ + e);
    }
    if (!any) return -1;
  }
  const ExpertCache::Access a = cache_->access(unit, tokens);
  int slot;
  if (a.evicted >= 0) {
    slot = slot_of_[a.evicted];
    slot_of_[a.evicted] = -1;
    prefetched_[a.evicted] = 0;
  } else {
    slot = used_slots_++;
    resident_in_layer_[layer]++;
  }
  slot_of_[unit] = slot;
  slots_[slot].unit = unit;
  slots_[slot].state = State::Empty;
  slots_[slot].prefetch_use = false;
  return slot;
}

bool TieredExpertStore::load_part(int slot, int i, WeightMatrix& out, double& pack_seconds) {
  Slot& s = slots_[slot];
  const Source& src = sources_[s.unit];
  try {
    out = src.m[i];
    out.data = reader_->read(s.buf[i], src.offset[i], src.m[i].bytes());
    // The same layout the resident store uses, so results are bit-identical (a file
    // written by `switchyard pack` holds it already).
    if (cpu::packs_at_load(out)) {
      const double t0 = now_seconds();
      auto* p = const_cast<uint8_t*>(out.data);
      for (int64_t r = 0; r < out.rows; ++r) cpu::pack_row(out.dtype, p + r * out.row_bytes(), p + r * out.row_bytes(), out.cols);
      out.packed = true;
      pack_seconds += now_seconds() - t0;
    }
    return true;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.error.empty()) s.error = e.what();
    return false;
  }
}

void TieredExpertStore::finish_part(int slot, double seconds, double pack_seconds) {
  // Called with mu_ held, once per tensor; the last one publishes the slot.
  Slot& s = slots_[slot];
  stats_.read_seconds += seconds;
  stats_.pack_seconds += pack_seconds;
  if (--s.parts_left > 0) return;
  s.state = s.error.empty() ? State::Ready : State::Failed;
  s.ready_at = now_seconds();
  if (s.state == State::Ready) {
    stats_.bytes_read += static_cast<int64_t>(s.w.bytes());
    stats_.loads++;
  }
  ready_.notify_all();
}

void TieredExpertStore::start_load(int slot, Load how) {
  Slot& s = slots_[slot];
  s.state = State::Loading;
  s.error.clear();
  s.parts_left = 3;
  s.issued_at = now_seconds();
  if (how == Load::Now) {
    mu_.unlock();
    WeightMatrix got[3];
    double pack = 0;
    const double t0 = now_seconds();
    for (int i = 0; i < 3; ++i) load_part(slot, i, got[i], pack);
    const double dt = now_seconds() - t0;
    mu_.lock();
    for (int i = 0; i < 3; ++i) {
      s.w.part(i) = got[i];
      finish_part(slot, i == 0 ? dt : 0.0, i == 0 ? pack : 0.0);
    }
    return;
  }
  // Gate, up and down load as three jobs so that one expert keeps three reads in flight;
  // the loads a layer is waiting for go ahead of prefetches.
  // Captures of 16 bytes, so that the job allocates nothing (see DirectReader::submit).
  for (int i = 0; i < 3; ++i) {
    reader_->submit(
        [this, slot, i] {
          WeightMatrix got;
          double pack = 0;
          const double t0 = now_seconds();
          load_part(slot, i, got, pack);
          const double dt = now_seconds() - t0;
          std::lock_guard<std::mutex> lock(mu_);
          slots_[slot].w.part(i) = got;
          finish_part(slot, dt, pack);
        },
        how == Load::Urgent);
  }
}

double TieredExpertStore::wait_ready(int slot, std::unique_lock<std::mutex>& lock) {
  double waited = 0;
  if (slots_[slot].state == State::Loading) {
    const double t0 = now_seconds();
    ready_.wait(lock, [&] { return slots_[slot].state != State::Loading; });
    stats_.wait_seconds += now_seconds() - t0;
    waited = std::max(0.0, slots_[slot].ready_at - t0);
  }
  if (slots_[slot].state == State::Failed) throw Error(slots_[slot].error);
  return waited;
}

void TieredExpertStore::begin_step() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_->begin_step();
}

void TieredExpertStore::plan_layer(int layer, const std::vector<int32_t>& experts, const std::vector<int64_t>& tokens,
                                   std::vector<std::vector<int32_t>>& groups) {
  if (tokens.size() != experts.size()) throw Error("expert store: plan_layer needs one token count per expert");
  std::lock_guard<std::mutex> lock(mu_);
  // Scratch kept between layers: planning allocates nothing once it has seen a layer.
  std::vector<int>& units = plan_units_;
  std::vector<int32_t>& hits = plan_hits_;
  std::vector<int32_t>& loading = plan_loading_;
  std::vector<int32_t>& deferred = plan_deferred_;
  units.clear();
  hits.clear();
  loading.clear();
  deferred.clear();
  for (int32_t e : experts) units.push_back(unit_of(layer, e));
  cache_->note_demand(units);
  const int64_t reads_before = stats_.misses + stats_.prefetch_used;
  // Resident ones first: pinned so that loading the others cannot evict them.
  for (size_t i = 0; i < experts.size(); ++i) {
    const int u = units[i];
    if (slot_of_[u] < 0) continue;
    cache_->access(u, static_cast<double>(tokens[i]));
    Slot& s = slots_[slot_of_[u]];
    if (s.pins++ == 0) pinned_++;
    planned_[u] = 1;
    if (s.state == State::Failed) {  // an earlier read failed (its step failed): read it again
      stats_.misses++;
      prefetched_[u] = 0;  // a use of this read, not of the prefetch that failed
      start_load(slot_of_[u], Load::Urgent);
      loading.push_back(experts[i]);
      continue;
    }
    stats_.hits++;
    if (prefetched_[u]) {
      stats_.prefetch_used++;
      prefetched_[u] = 0;
      s.prefetch_use = true;
    }
    (s.state == State::Ready ? hits : loading).push_back(experts[i]);
  }
  // Then the missing ones, loading in parallel while the resident ones compute.
  for (size_t i = 0; i < experts.size(); ++i) {
    const int u = units[i];
    if (planned_[u]) continue;
    stats_.misses++;
    const int slot = claim_slot(u, static_cast<double>(tokens[i]));
    if (slot < 0) {
      deferred.push_back(experts[i]);
      deferred_tokens_[u] = static_cast<double>(tokens[i]);  // for the policy, when acquire() loads it
      continue;
    }
    Slot& s = slots_[slot];
    if (s.pins++ == 0) pinned_++;
    planned_[u] = 1;
    start_load(slot, Load::Urgent);
    loading.push_back(experts[i]);
  }
  note_layer_reads(static_cast<double>(stats_.misses + stats_.prefetch_used - reads_before));
  // A prefetch is a guess for this use of the layer: one it did not need was wrong, even if
  // a later step uses that expert (prefetch accuracy counts the guesses that were right).
  for (int e = 0; e < n_expert_; ++e) {
    const int u = unit_of(layer, e);
    if (prefetched_[u] && !planned_[u]) prefetched_[u] = 0;
  }
  // Filled in place, so that the caller's groups keep their capacity from layer to layer.
  size_t n = 0;
  auto put = [&](const int32_t* first, const int32_t* last) {
    if (groups.size() <= n) groups.emplace_back();
    groups[n++].assign(first, last);
  };
  if (!hits.empty()) put(hits.data(), hits.data() + hits.size());
  if (!loading.empty()) put(loading.data(), loading.data() + loading.size());
  // More experts than slots: one at a time once the groups before have been released.
  for (const int32_t& e : deferred) put(&e, &e + 1);
  groups.resize(n);
}

const FfnWeights& TieredExpertStore::acquire(int layer, int expert) {
  std::unique_lock<std::mutex> lock(mu_);
  const int u = unit_of(layer, expert);
  if (!planned_[u]) {  // deferred by plan_layer, or a caller that did not plan
    int slot = slot_of_[u];
    // The compute thread waits for all of this: counted with the other waits for loads.
    const double t0 = now_seconds();
    const double tokens = deferred_tokens_[u] > 0 ? deferred_tokens_[u] : 1.0;
    deferred_tokens_[u] = 0;
    if (slot >= 0 && slots_[slot].state == State::Failed) {
      start_load(slot, Load::Now);  // an earlier read failed: read it again
    } else if (slot < 0) {
      // A prefetch may still be loading into this layer's only free slot: wait for it.
      while ((slot = claim_slot(u, tokens)) < 0) {
        const int m = u / n_expert_;
        bool loading = false;
        for (int e = 0; e < n_expert_; ++e) {
          const int s = slot_of_[m * n_expert_ + e];
          loading |= s >= 0 && slots_[s].state == State::Loading;
        }
        if (!loading) throw Error("expert store: every slot of layer " + std::to_string(layer) + " is in use (release experts before acquiring more)");
        ready_.wait(lock);
      }
      start_load(slot, Load::Now);
    }
    stats_.wait_seconds += now_seconds() - t0;
    if (slots_[slot].pins++ == 0) pinned_++;
    planned_[u] = 1;
  }
  const int slot = slot_of_[u];
  const double waited = wait_ready(slot, lock);
  Slot& s = slots_[slot];
  if (s.prefetch_use) {
    s.prefetch_use = false;
    stats_.prefetch_latency_seconds += s.ready_at - s.issued_at;
    stats_.prefetch_wait_seconds += waited;
  }
  return s.w;
}

void TieredExpertStore::release(int layer, int expert) {
  std::lock_guard<std::mutex> lock(mu_);
  const int u = unit_of(layer, expert);
  if (!planned_[u]) return;
  planned_[u] = 0;
  Slot& s = slots_[slot_of_[u]];
  s.prefetch_use = false;  // planned but never acquired: not a use
  if (--s.pins == 0) pinned_--;
}

void TieredExpertStore::prefetch(int layer, const std::vector<int32_t>& experts) {
  std::lock_guard<std::mutex> lock(mu_);
  // The predicted experts already resident are about to be used: not victims.
  for (int32_t e : experts) shielded_[unit_of(layer, e)] = 1;
  for (int32_t e : experts) {
    const int u = unit_of(layer, e);
    if (slot_of_[u] >= 0) continue;
    const int slot = claim_slot(u, 0.0);  // loaded, not yet used: no frequency
    if (slot < 0) break;
    prefetched_[u] = 1;
    stats_.prefetch_issued++;
    start_load(slot, Load::Background);
  }
  for (int32_t e : experts) shielded_[unit_of(layer, e)] = 0;
}

void TieredExpertStore::pin_profile(const std::string& path, const std::string& policy) {
  const Trace t = read_trace(path);
  if (t.info.n_expert != n_expert_ || t.info.n_moe() != static_cast<int>(sources_.size()) / n_expert_) {
    throw Error(path + ": --expert-profile trace is for a model with " + std::to_string(t.info.n_moe()) + " MoE layers of " +
                std::to_string(t.info.n_expert) + " experts, this one has " + std::to_string(sources_.size() / n_expert_) +
                " of " + std::to_string(n_expert_));
  }
  // Another model of the same size routes differently: its hot experts are not this one's.
  const TraceInfo mine = TraceInfo::from_hparams(hp_, t.info.static_gating);
  if (t.info.model_name != mine.model_name || t.info.top_k != mine.top_k || t.info.moe_layers != mine.moe_layers) {
    throw Error(path + ": --expert-profile trace was recorded with the model '" + t.info.model_name + "' (top-" +
                std::to_string(t.info.top_k) + "), not this one ('" + mine.model_name + "', top-" +
                std::to_string(mine.top_k) + "); record one with this model's --trace-experts");
  }
  // Half of a token's experts stay free for the cold ones and the prefetches.
  const int reserve = std::max(1, (t.info.top_k + 1) / 2);
  const auto pins = choose_pinned_experts(t, per_layer_, reserve, policy, kDefaultLfuDecay);
  std::unique_lock<std::mutex> lock(mu_);
  for (int m = 0; m < t.info.n_moe(); ++m) {
    int pinned_here = 0;
    for (; pinned_here < static_cast<int>(pins[m].size()); ++pinned_here) {
      const int unit = m * n_expert_ + pins[m][pinned_here];
      const int slot = claim_slot(unit, 0.0);
      if (slot < 0) break;
      slots_[slot].permanent = true;
      slots_[slot].pins = 1;
      pinned_++;
      start_load(slot, Load::Urgent);
    }
    profile_pins_.push_back(pinned_here);
  }
  ready_.wait(lock, [&] {
    return std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == State::Loading; });
  });
}

void TieredExpertStore::note_layer_reads(double reads) {
  // Over the last ~20 MoE layers: about one token's worth for olmoe, so a change of the
  // routing (prompt to decode, a skewed batch) moves the depth within a step or two.
  reads_per_layer_ = reads_per_layer_ < 0 ? reads : 0.95 * reads_per_layer_ + 0.05 * reads;
  suggested_layers_.store(prefetch_layers_for(reads_per_layer_, reader_->threads()), std::memory_order_relaxed);
}

int prefetch_layers_for(double expert_reads_per_layer, int io_threads) {
  // Each expert is three reads (gate, up, down). A layer whose own loads fill the I/O
  // threads needs no lead beyond the next layer, and looking further only evicts experts
  // that the nearer layers still need (uniform olmoe at 25% and 50%, 5.9 and 3.9 experts a
  // layer: -3% with 2 layers against 1, earlier sessions). Fewer reads leave the disk idle
  // at every layer boundary unless later layers' loads are queued already: then enough
  // layers for one and a half times the threads. Packed olmoe Q4_0, 64-token decodes, page
  // cache dropped: skewed routing at a 50% cache (1.7 a layer) 22.5 / 24.3 / 24.8 tokens/s
  // with 1 / 2 / 3 layers; uniform at 75% (1.9) 21.9 / 22.5, 22.1 / 22.8 and 23.0 / 23.3 with
  // 2 / 3 in three pairs.
  if (expert_reads_per_layer <= 0) return 3;
  const double parts = 3.0 * expert_reads_per_layer, threads = io_threads;
  if (parts >= threads) return 1;
  return static_cast<int>(std::clamp(std::ceil(1.5 * threads / parts), 2.0, 3.0));
}

int auto_prefetch_layers(size_t budget_bytes, size_t all_bytes) {
  return 3 * budget_bytes >= 2 * all_bytes ? 2 : 1;
}

}  // namespace sy
