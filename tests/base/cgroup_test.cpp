// Where the memory and CPU limits are read from (base/cgroup.h), and the CPU count that
// sets the default threads (base/cpu_info.h).
#include "base/cgroup.h"

#include <gtest/gtest.h>
#include <sched.h>

#include "base/cpu_info.h"
#include "base/whole_file.h"

namespace sy {
namespace {

TEST(Cgroup, FindsTheControllersCgroup) {
  // cgroup v1: the controller's line, even when it shares a hierarchy.
  CgroupPath p = parse_cgroup("9:name=systemd:/\n4:memory:/process_api/abc/syt\n0::/\n", "memory");
  EXPECT_TRUE(p.v1);
  EXPECT_EQ(p.path, "/process_api/abc/syt");
  p = parse_cgroup("3:cpu,memory,pids:/box\n", "memory");
  EXPECT_TRUE(p.v1);
  EXPECT_EQ(p.path, "/box");
  p = parse_cgroup("2:cpu,cpuacct:/docker/42\n4:memory:/m\n", "cpu");
  EXPECT_TRUE(p.v1);
  EXPECT_EQ(p.path, "/docker/42");
  // cgroup v2: the unified hierarchy's single line.
  p = parse_cgroup("0::/user.slice/run-1.scope\n", "memory");
  EXPECT_FALSE(p.v1);
  EXPECT_EQ(p.path, "/user.slice/run-1.scope");
  // "memoryx" is not "memory", nor "cpuset" "cpu"; nothing at all gives no path.
  EXPECT_TRUE(parse_cgroup("5:memoryx:/a\n", "memory").path.empty());
  EXPECT_TRUE(parse_cgroup("5:cpuset:/a\n", "cpu").path.empty());
  EXPECT_TRUE(parse_cgroup("", "memory").path.empty());
}

// A limit on any cgroup above the process's applies too: every ancestor is read.
TEST(Cgroup, AncestorsNearestFirst) {
  EXPECT_EQ(cgroup_ancestors("/a/b/c"), (std::vector<std::string>{"/a/b/c", "/a/b", "/a", "/"}));
  EXPECT_EQ(cgroup_ancestors("/user.slice/"), (std::vector<std::string>{"/user.slice", "/"}));
  EXPECT_EQ(cgroup_ancestors("/"), (std::vector<std::string>{"/"}));
  EXPECT_TRUE(cgroup_ancestors("").empty());
  EXPECT_TRUE(cgroup_ancestors("relative").empty());
}

TEST(Cgroup, ReadsSystemFilesLeniently) {
  EXPECT_NE(read_system_file("/proc/self/status").find("Cpus_allowed"), std::string::npos);
  EXPECT_EQ(read_system_file("/nonexistent/cpu.max"), "");
}

TEST(CpuInfo, ParsesQuotas) {
  EXPECT_DOUBLE_EQ(parse_cpu_max("200000 100000\n"), 2.0);
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0.0);
  EXPECT_EQ(parse_cpu_max(""), 0.0);
  EXPECT_EQ(parse_cpu_max("100000 0\n"), 0.0);
  EXPECT_DOUBLE_EQ(parse_cfs_quota("400000\n", "100000\n"), 4.0);
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), 0.0);
  EXPECT_EQ(parse_cfs_quota("", ""), 0.0);
}

TEST(CpuInfo, ThreadsFollowAffinityAndQuota) {
  EXPECT_EQ(usable_cpus(16, 0), 16);    // no quota
  EXPECT_EQ(usable_cpus(16, 2.0), 2);   // docker --cpus 2
  EXPECT_EQ(usable_cpus(16, 1.5), 2);   // most of a second CPU still helps
  EXPECT_EQ(usable_cpus(16, 0.25), 1);  // never none
  EXPECT_EQ(usable_cpus(2, 8.0), 2);    // taskset -c 0,1 inside a larger quota
  // This process: at most the CPUs its affinity allows.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_LE(usable_cpus(), CPU_COUNT(&set));
}

}  // namespace
}  // namespace sy
