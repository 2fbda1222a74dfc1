// How a run used the expert cache, from the tiered store's counters taken before and
// after it: the figures `bench`, `generate`, `perplexity` and `serve` report. A prefetched
// expert that its layer then used counts as prefetched, not as a hit; every expert read
// from the file (on demand, or by a prefetch, used or not) counts as a load, which is what
// an offline policy's miss (Belady's MIN in `analyze`) is comparable with.
#pragma once

#include <cstdint>
#include <string>

#include "experts/tiered_expert_store.h"

namespace sy {

struct ExpertCacheUse {
  double uses = 0;        // experts the layers needed
  double hits = 0;        // resident before anything asked for them
  double prefetched = 0;  // brought in by a prefetch, then used
  double misses = 0;      // loaded while their layer waited
  double loads = 0;       // experts read from the file
  double bytes_read = 0;
  double prefetch_issued = 0;
  double wait_seconds = 0;  // the compute's time waiting for loads

  double hit_rate() const { return hits / uses; }
  double prefetched_rate() const { return prefetched / uses; }
  double load_rate() const { return loads / uses; }
  double prefetch_accuracy() const { return prefetch_issued > 0 ? prefetched / prefetch_issued : 0.0; }
};

// The counters' difference; `uses` is at least 1, so that the rates are defined.
ExpertCacheUse expert_cache_use(const ExpertStoreStats& before, const ExpertStoreStats& after);

// One line for a person: the rates, the loads and bytes per token and the wait.
std::string describe_expert_cache_use(const ExpertCacheUse& u, double tokens);

}  // namespace sy
