// How many CPUs this process can keep busy: the CPUs its affinity mask allows (taskset, a
// cpuset), lowered by its cgroup's CPU quota (docker --cpus, systemd's CPUQuota=). It is
// the default thread count, and more threads than that only wait: every step ends at a
// barrier that waits for the thread the scheduler left off the CPU (a 2-CPU machine with
// -t 16 decoded 3x slower).
#pragma once

#include <string_view>

namespace sy {

int usable_cpus();

// The parts, for tests. The CPUs of a cgroup v2 "cpu.max" ("QUOTA PERIOD"; "max ...": no
// limit, 0).
double parse_cpu_max(std::string_view text);
// The same from cgroup v1's cpu.cfs_quota_us ("-1": no limit, 0) and cpu.cfs_period_us.
double parse_cfs_quota(std::string_view quota, std::string_view period);
// The thread count for `affinity` CPUs and a quota of `quota_cpus` (0: none): a quota of
// 1.5 CPUs still runs 2 threads, since each gets most of a CPU.
int usable_cpus(int affinity, double quota_cpus);

}  // namespace sy
