// Wall time as seconds on the steady clock, for timings that are stored and subtracted
// later (load start and end, busy spans, profile sums).
#pragma once

#include <chrono>

namespace sy {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace sy
