#include "base/cgroup.h"

#include <algorithm>

#include "base/whole_file.h"

namespace sy {

CgroupPath parse_cgroup(std::string_view text, std::string_view controller) {
  CgroupPath unified;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    // "hierarchy-id:controllers:path"
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    if (controllers.empty()) {
      unified = {false, path};
      continue;
    }
    for (size_t s = 0; s <= controllers.size();) {
      const size_t comma = std::min(controllers.find(',', s), controllers.size());
      if (controllers.substr(s, comma - s) == controller) return {true, path};
      s = comma + 1;
    }
  }
  return unified;
}

std::vector<std::string> cgroup_ancestors(const std::string& path) {
  std::vector<std::string> out;
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty() || p[0] != '/') return out;
  for (;;) {
    out.push_back(p);
    if (p == "/") break;
    const size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  return out;
}

CgroupDirs cgroup_dirs(std::string_view controller) {
  const CgroupPath cg = parse_cgroup(read_system_file("/proc/self/cgroup"), controller);
  if (cg.path.empty()) return {};
  // v1 mounts each hierarchy under its controllers' names ("cpu,cpuacct" has a "cpu" link).
  const std::string root =
      cg.v1 ? "/sys/fs/cgroup/" + std::string(controller) : std::string("/sys/fs/cgroup");
  CgroupDirs out{cg.v1, {}};
  for (const std::string& p : cgroup_ancestors(cg.path)) out.dirs.push_back(p == "/" ? root : root + p);
  return out;
}

}  // namespace sy
