// Where this process sits in the cgroup hierarchies (a container, a systemd scope), whose
// files limit what it may use: memory (memory_info.h) and CPU time (cpu_info.h).
#pragma once

#include <string>
#include <string_view>

namespace sy {

// Where /proc/self/cgroup puts this process for `controller` ("memory", "cpu"): the cgroup
// v1 hierarchy of that controller if there is one (v1 = true), else the unified (v2)
// hierarchy's path (v1 = false). Empty path: not found.
struct CgroupPath {
  bool v1 = false;
  std::string path;
};
CgroupPath parse_cgroup(std::string_view proc_self_cgroup, std::string_view controller);

// The folder of this process's cgroup for `controller`, under /sys/fs/cgroup (dir "": none);
// v1 and v2 name their limit files differently.
struct CgroupDir {
  bool v1 = false;
  std::string dir;
};
CgroupDir cgroup_dir(std::string_view controller);

// A /proc or /sys file's text, "" when it cannot be read (no such limit on this machine).
std::string read_system_file(const std::string& path);

}  // namespace sy
