// The huge page checks behind the expert cache's warning: the sysfs mode and the share of
// a set of ranges that /proc/self/smaps shows on huge pages.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace sy {
namespace {

TEST(HugePages, ParsesTheSysfsMode) {
  EXPECT_EQ(parse_transparent_huge_page_mode("always [madvise] never\n"), "madvise");
  EXPECT_EQ(parse_transparent_huge_page_mode("always madvise [never]\n"), "never");
  EXPECT_EQ(parse_transparent_huge_page_mode(""), "");
  EXPECT_EQ(parse_transparent_huge_page_mode("garbage ] ["), "");
}

const void* at(uint64_t address) {
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(address));
}

TEST(HugePages, CountsOnlyTheMappingsTheRangesOverlap) {
  // Two mappings of 8 MiB: the first all on huge pages, the second on none; a third that no
  // range touches is on huge pages and must not count.
  const std::string smaps =
      "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n"
      "Size:               8192 kB\n"
      "Rss:                8192 kB\n"
      "AnonHugePages:      8192 kB\n"
      "VmFlags: rd wr mr mw me ac sd hg\n"
      "7f0000800000-7f0001000000 rw-p 00000000 00:00 0 \n"
      "Rss:                8192 kB\n"
      "AnonHugePages:         0 kB\n"
      "7f0002000000-7f0002800000 rw-p 00000000 00:00 0 [heap]\n"
      "Rss:                8192 kB\n"
      "AnonHugePages:      8192 kB\n";
  const uint64_t base = 0x7f0000000000;
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps(smaps, {{at(base), 8 << 20}}), 1.0);
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps(smaps, {{at(base + (8 << 20)), 8 << 20}}), 0.0);
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps(smaps, {{at(base), 16 << 20}}), 0.5);
  // Half of each mapping: counted in proportion.
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps(smaps, {{at(base + (4 << 20)), 8 << 20}}), 0.5);
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps(smaps, {{at(0x1000), 4096}}), -1.0);  // nothing mapped there
  EXPECT_DOUBLE_EQ(huge_page_fraction_in_smaps("not smaps at all\n", {{at(base), 8 << 20}}), -1.0);
}

TEST(HugePages, ReadsThisProcessesSmaps) {
  if (!std::ifstream("/proc/self/smaps").good()) GTEST_SKIP() << "no /proc/self/smaps on this system";
  // Whether the kernel grants huge pages depends on the host; the reading must be a share.
  HugePageMemory m(size_t{8} << 20, /*prefault=*/true);
  const double f = huge_page_fraction({{m.data(), m.size()}});
  EXPECT_GE(f, 0.0);
  EXPECT_LE(f, 1.0);
  if (transparent_huge_page_mode() == "never") {
    EXPECT_EQ(f, 0.0);
  }
}

}  // namespace
}  // namespace sy
