#include "base/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include <new>
#include <utility>

namespace sy {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "Key:   123 kB" -> 123 * 1024 bytes; -1 when the line is not that key or not a number.
int64_t kb_field(std::string_view line, std::string_view key) {
  if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') return -1;
  line.remove_prefix(key.size() + 1);
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  int64_t kb = 0;
  if (std::from_chars(line.data(), line.data() + line.size(), kb).ec != std::errc()) return -1;
  return kb * 1024;
}

}  // namespace

std::string parse_transparent_huge_page_mode(std::string_view text) {
  const size_t open = text.find('['), close = text.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return "";
  return std::string(text.substr(open + 1, close - open - 1));
}

std::string transparent_huge_page_mode() {
  return parse_transparent_huge_page_mode(read_text("/sys/kernel/mm/transparent_hugepage/enabled"));
}

double huge_page_fraction_in_smaps(std::string_view text, const std::vector<MemoryRange>& ranges) {
  double resident = 0, huge = 0;
  double share = 0;  // the part of the current mapping that the ranges cover
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    // A mapping's header: "start-end perms offset dev inode [path]", addresses in hex.
    const size_t dash = line.find('-');
    uint64_t start = 0, end = 0;
    if (dash != std::string_view::npos && dash > 0 &&
        std::from_chars(line.data(), line.data() + dash, start, 16).ptr == line.data() + dash &&
        std::from_chars(line.data() + dash + 1, line.data() + line.size(), end, 16).ec == std::errc() && end > start) {
      uint64_t covered = 0;
      for (const MemoryRange& r : ranges) {
        const uint64_t a = reinterpret_cast<uintptr_t>(r.data), b = a + r.bytes;
        if (std::min(b, end) > std::max(a, start)) covered += std::min(b, end) - std::max(a, start);
      }
      share = static_cast<double>(covered) / static_cast<double>(end - start);
      continue;
    }
    if (share <= 0) continue;
    if (const int64_t v = kb_field(line, "Rss"); v >= 0) resident += share * static_cast<double>(v);
    if (const int64_t v = kb_field(line, "AnonHugePages"); v >= 0) huge += share * static_cast<double>(v);
  }
  return resident > 0 ? std::min(1.0, huge / resident) : -1.0;
}

double huge_page_fraction(const std::vector<MemoryRange>& ranges) {
  return huge_page_fraction_in_smaps(read_text("/proc/self/smaps"), ranges);
}

void touch_pages(void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 4096) static_cast<volatile uint8_t*>(p)[off] = 0;
}

HugePageMemory::HugePageMemory(size_t bytes, bool prefault) {
  if (bytes == 0) return;
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-reserve by one huge page, then give back the unaligned head and tail.
  void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* p = static_cast<uint8_t*>(raw);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
  if (base > p) ::munmap(p, static_cast<size_t>(base - p));
  const size_t tail = static_cast<size_t>(p + size + kHugePage - (base + size));
  if (tail > 0) ::munmap(base + size, tail);
  ::madvise(base, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
  data_ = base;
  size_ = size;
  if (prefault) touch_pages(base, size);
}

HugePageMemory::~HugePageMemory() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

HugePageMemory& HugePageMemory::operator=(HugePageMemory&& o) noexcept {
  if (this != &o) {
    HugePageMemory old(std::move(*this));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace sy
