// Where this process sits in the cgroup hierarchies (a container, a systemd scope), whose
// files limit what it may use: memory (memory_info.h) and CPU time (cpu_info.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sy {

// Where /proc/self/cgroup puts this process for `controller` ("memory", "cpu"): the cgroup
// v1 hierarchy of that controller if there is one (v1 = true), else the unified (v2)
// hierarchy's path (v1 = false). Empty path: not found.
struct CgroupPath {
  bool v1 = false;
  std::string path;
};
CgroupPath parse_cgroup(std::string_view proc_self_cgroup, std::string_view controller);

// The folders of this process's cgroup for `controller` and of every cgroup above it, under
// /sys/fs/cgroup, nearest first (none: no cgroup). A limit set on any of them applies (a
// systemd slice's MemoryMax= over the scope the process runs in); v1 and v2 name their
// limit files differently.
struct CgroupDirs {
  bool v1 = false;
  std::vector<std::string> dirs;
};
CgroupDirs cgroup_dirs(std::string_view controller);

// "/a/b/c" -> "/a/b/c", "/a/b", "/a", "/".
std::vector<std::string> cgroup_ancestors(const std::string& path);

}  // namespace sy
