// Progress of a long file write on stderr (synth, pack).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace sy::cli {

// One line redrawn as the percentage changes on a terminal, a line every 10% otherwise
// (logs of benchmark scripts).
class ProgressBar {
 public:
  void update(uint64_t done, uint64_t total) {
    const int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (pct == last_pct_ || (!tty_ && pct / 10 == last_pct_ / 10)) return;
    last_pct_ = pct;
    const double s = seconds();
    constexpr int kWidth = 40;
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < pct * kWidth / 100 ? '#' : '.';
    bar[kWidth] = '\0';
    std::fprintf(stderr, "%s[%s] %3d%%  %.2f / %.2f GB  %.0f MB/s%s", tty_ ? "\r" : "", bar, pct, done / 1e9,
                 total / 1e9, s > 0 ? done / 1e6 / s : 0.0, tty_ && done < total ? " " : "\n");
    std::fflush(stderr);
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool tty_ = isatty(fileno(stderr)) != 0;
  int last_pct_ = -1;
};

}  // namespace sy::cli
