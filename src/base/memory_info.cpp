#include "base/memory_info.h"

#include <algorithm>
#include <cstdio>

#include "base/cgroup.h"
#include "base/error.h"
#include "base/whole_file.h"

namespace sy {
namespace {

// The unsigned integer at the start of `s`, after any spaces (0: none).
size_t leading_number(std::string_view s) {
  size_t i = s.find_first_not_of(' '), v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + static_cast<size_t>(s[i] - '0');
  return v;
}

// The unsigned integer after `prefix` at the start of a line of `text` (0: none).
size_t value_after(std::string_view text, std::string_view prefix) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.substr(0, prefix.size()) == prefix) return leading_number(line.substr(prefix.size()));
    at = end + 1;
  }
  return 0;
}

}  // namespace

size_t parse_mem_available(std::string_view meminfo) {
  return value_after(meminfo, "MemAvailable:") * 1024;
}

size_t parse_swap_free(std::string_view meminfo) {
  return value_after(meminfo, "SwapFree:") * 1024;
}

size_t parse_memory_stat(std::string_view memory_stat, std::string_view key) {
  return value_after(memory_stat, std::string(key) + " ");
}

size_t parse_memory_limit(std::string_view text) {
  const size_t v = leading_number(text);  // "max" (v2's "no limit") gives 0
  return v >= (size_t{1} << 62) ? 0 : v;  // v1 writes "no limit" as 2^63 rounded down to a page
}

size_t available_memory_bytes() {
  const std::string meminfo = read_system_file("/proc/meminfo");
  // Swap lets an allocation past the RAM succeed (slowly) rather than end in the OOM killer.
  const size_t swap = parse_swap_free(meminfo);
  const size_t ram = parse_mem_available(meminfo);
  const size_t available = ram == 0 ? 0 : ram + swap;
  // The tightest of the limits on this cgroup and the ones above it, each less what its
  // processes hold and the kernel cannot reclaim: anonymous memory.
  size_t left = available;
  const CgroupDirs cg = cgroup_dirs("memory");
  for (const std::string& dir : cg.dirs) {
    const size_t limit =
        parse_memory_limit(read_system_file(dir + (cg.v1 ? "/memory.limit_in_bytes" : "/memory.max")));
    if (limit == 0) continue;
    const std::string stat = read_system_file(dir + "/memory.stat");
    const size_t anon = cg.v1 ? parse_memory_stat(stat, "total_rss") : parse_memory_stat(stat, "anon");
    const size_t here = (limit > anon ? limit - anon : 0) + swap;
    left = left == 0 ? here : std::min(left, here);
  }
  return left;
}

std::string gigabytes(size_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return s;
}

void require_available_memory(size_t bytes, const std::string& what, const std::string& way_out) {
  const size_t available = available_memory_bytes();
  if (available == 0 || bytes <= available) return;
  throw Error(what + " needs " + gigabytes(bytes) + ", but only " + gigabytes(available) +
              " of memory is available; " + way_out);
}

}  // namespace sy
