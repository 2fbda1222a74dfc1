#include "experts/cache_use.h"

#include <algorithm>
#include <cstdio>

namespace sy {

ExpertCacheUse expert_cache_use(const ExpertStoreStats& before, const ExpertStoreStats& after) {
  ExpertCacheUse u;
  u.prefetched = static_cast<double>(after.prefetch_used - before.prefetch_used);
  u.hits = static_cast<double>(after.hits - before.hits) - u.prefetched;
  u.misses = static_cast<double>(after.misses - before.misses);
  u.uses = std::max(1.0, u.hits + u.prefetched + u.misses);
  u.loads = static_cast<double>(after.loads - before.loads);
  u.bytes_read = static_cast<double>(after.bytes_read - before.bytes_read);
  u.prefetch_issued = static_cast<double>(after.prefetch_issued - before.prefetch_issued);
  u.wait_seconds = after.wait_seconds - before.wait_seconds;
  return u;
}

std::string describe_expert_cache_use(const ExpertCacheUse& u, double tokens) {
  tokens = std::max(1.0, tokens);
  // Without a prefetch issued there is no accuracy to give (0% would read as all guesses wrong).
  char accuracy[48] = "no prefetch";
  if (u.prefetch_issued > 0) {
    std::snprintf(accuracy, sizeof accuracy, "prefetch accuracy %.1f%%", 100.0 * u.prefetch_accuracy());
  }
  char line[320];
  std::snprintf(
      line, sizeof line,
      "%.1f%% hits, %.1f%% prefetched, %.1f%% loaded on demand; %.0f loads (%.2f per token, %.1f%% of the "
      "experts needed), %.1f MB read per token; %s; waited %.2f s for loads",
      100.0 * u.hit_rate(), 100.0 * u.prefetched_rate(), 100.0 * u.misses / u.uses, u.loads, u.loads / tokens,
      100.0 * u.load_rate(), u.bytes_read / tokens / 1e6, accuracy, u.wait_seconds);
  return line;
}

}  // namespace sy
