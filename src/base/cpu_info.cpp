#include "base/cpu_info.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <thread>

#include "base/cgroup.h"
#include "base/whole_file.h"

namespace sy {
namespace {

// The number at the start of `s` after spaces (NaN: none).
double leading_double(std::string_view s) {
  const size_t i = std::min(s.find_first_not_of(' '), s.size());
  double v = NAN;
  std::from_chars(s.data() + i, s.data() + s.size(), v);
  return v;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  const unsigned n = std::thread::hardware_concurrency();  // more than CPU_SETSIZE CPUs
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace

double parse_cfs_quota(std::string_view quota_text, std::string_view period_text) {
  const double quota = leading_double(quota_text), period = leading_double(period_text);
  return std::isfinite(quota) && std::isfinite(period) && quota > 0 && period > 0 ? quota / period : 0;
}

double parse_cpu_max(std::string_view text) {  // v2 puts v1's two files on one line
  const size_t space = text.find(' ');
  return space == std::string_view::npos ? 0 : parse_cfs_quota(text.substr(0, space), text.substr(space + 1));
}

int usable_cpus(int affinity, double quota_cpus) {
  if (quota_cpus <= 0) return affinity;
  return std::clamp(static_cast<int>(std::ceil(quota_cpus - 1e-9)), 1, affinity);
}

int usable_cpus() {
  static const int n = [] {
    // The tightest quota of this cgroup and the ones above it.
    const CgroupDirs cg = cgroup_dirs("cpu");
    double quota = 0;
    for (const std::string& dir : cg.dirs) {
      const double here = cg.v1 ? parse_cfs_quota(read_system_file(dir + "/cpu.cfs_quota_us"),
                                                  read_system_file(dir + "/cpu.cfs_period_us"))
                                : parse_cpu_max(read_system_file(dir + "/cpu.max"));
      if (here > 0) quota = quota > 0 ? std::min(quota, here) : here;
    }
    return usable_cpus(affinity_cpus(), quota);
  }();
  return n;
}

}  // namespace sy
