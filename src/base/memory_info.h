// How much memory this process can still get: the machine's MemAvailable, lowered by the
// memory limits of its cgroup and of the cgroups above it (a container, a `systemd-run -p
// MemoryMax=` scope, the slice around it). The large allocations whose size follows the
// user's choices (the weights copied at load, the expert cache's slots, the KV cache) check
// it first, so that a size that cannot fit is refused with a clear error instead of
// std::bad_alloc or the OOM killer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sy {

// Bytes this process can still allocate (0: unknown). Lenient by design: page cache counts
// as available, since the kernel reclaims it before it fails an allocation, and so does
// free swap.
size_t available_memory_bytes();

// Throws sy::Error when `bytes` is more than available_memory_bytes() (when known):
// "<what> needs X GB, but only Y GB of memory is available; <way_out>".
void require_available_memory(size_t bytes, const std::string& what, const std::string& way_out);

// "12.3 GB" (decimal gigabytes, as the rest of the logs).
std::string gigabytes(size_t bytes);

// The parts, for tests. The value of "MemAvailable:" in /proc/meminfo, in bytes (0: none).
size_t parse_mem_available(std::string_view meminfo);
// The same for "SwapFree:".
size_t parse_swap_free(std::string_view meminfo);
// The value of `key` in a memory.stat file (0: absent).
size_t parse_memory_stat(std::string_view memory_stat, std::string_view key);
// A cgroup's memory limit as its file gives it ("max" or a page-rounded 2^63: none, 0).
size_t parse_memory_limit(std::string_view text);

}  // namespace sy
