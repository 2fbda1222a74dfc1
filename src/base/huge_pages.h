// Zero-filled anonymous memory, 2 MiB aligned and advised to be backed by transparent huge
// pages. Large buffers that are streamed (weights, the KV cache) need them: with 4 KiB pages
// every page costs a TLB walk and the hardware prefetcher stops at every page boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

struct MemoryRange {
  const void* data;
  size_t bytes;
};

// The kernel's transparent huge page mode ("always", "madvise" or "never"; empty when
// unknown), from /sys/kernel/mm/transparent_hugepage/enabled or from that file's text.
std::string transparent_huge_page_mode();
std::string parse_transparent_huge_page_mode(std::string_view sysfs_text);

// The share of the resident bytes of `ranges` that sit on huge pages, from
// /proc/self/smaps or from its text; -1 when none of them is resident. A mapping that
// holds more than the ranges (the kernel merges neighbouring ones) counts in proportion
// to its overlap with them. Why it matters beyond the TLB: a direct read into 4 KiB pages
// carries one DMA segment per page, and virtio disks were measured reading ~1.5-2x slower
// that way (docs/journal/expert-buffering.md, "Twenty-fifth session").
double huge_page_fraction(const std::vector<MemoryRange>& ranges);
double huge_page_fraction_in_smaps(std::string_view smaps_text, const std::vector<MemoryRange>& ranges);

// Faults in every page of [p, p + bytes) now (writes a zero byte per 4 KiB page).
void touch_pages(void* p, size_t bytes);

class HugePageMemory {
 public:
  HugePageMemory() = default;
  // Throws std::bad_alloc when the memory cannot be mapped. Untouched pages cost nothing;
  // `prefault` touches every page now, so that first use does not pay the page faults
  // (and the zeroing of each fresh page) on the hot path.
  explicit HugePageMemory(size_t bytes, bool prefault = false);
  ~HugePageMemory();
  HugePageMemory(HugePageMemory&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  HugePageMemory& operator=(HugePageMemory&& o) noexcept;
  HugePageMemory(const HugePageMemory&) = delete;
  HugePageMemory& operator=(const HugePageMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;  // rounded up to whole huge pages
};

}  // namespace sy
