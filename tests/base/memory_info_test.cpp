// The memory check behind the KV cache's and the expert cache's "needs X GB, only Y GB
// available" errors: the /proc and cgroup files it reads, and the check itself here.
#include "base/memory_info.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "runtime/kv_cache.h"

namespace sy {
namespace {

TEST(MemoryInfo, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       24576000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   23792980 kB\n"
      "Buffers:            1234 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), size_t{23792980} * 1024);
  EXPECT_EQ(parse_swap_free(meminfo), 0u);
  EXPECT_EQ(parse_swap_free(meminfo + "SwapTotal:  2000 kB\nSwapFree:   1500 kB\n"), size_t{1500} * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 5 kB\n"), 0u);
  EXPECT_EQ(parse_mem_available(""), 0u);
}

TEST(MemoryInfo, ParsesLimitsAndStats) {
  EXPECT_EQ(parse_memory_limit("1073741824\n"), size_t{1} << 30);
  EXPECT_EQ(parse_memory_limit("max\n"), 0u);
  EXPECT_EQ(parse_memory_limit("9223372036854771712\n"), 0u);  // v1's "no limit"
  EXPECT_EQ(parse_memory_limit(""), 0u);
  const std::string stat = "cache 1000\nrss 3137536\ntotal_rss 463073280\nanon 777\n";
  EXPECT_EQ(parse_memory_stat(stat, "rss"), 3137536u);
  EXPECT_EQ(parse_memory_stat(stat, "total_rss"), 463073280u);
  EXPECT_EQ(parse_memory_stat(stat, "anon"), 777u);
  EXPECT_EQ(parse_memory_stat(stat, "swap"), 0u);
}

TEST(MemoryInfo, TooBigAKvCacheIsRefusedBeforeItIsAllocated) {
  if (available_memory_bytes() == 0) GTEST_SKIP() << "no /proc/meminfo here";
  // 2^26 blocks of 256 positions of 4 layers x 4096 f32 values: 2^50 bytes a side.
  try {
    KvCache c(4, 4096, 4096, int64_t{1} << 26, 256, 1, DType::F32);
    FAIL() << "a KV cache of 2.3 PB was allocated";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(
        m.find("the KV cache (17179869184 positions of F32 keys and values) needs 2251799.8 GB, but only "),
        std::string::npos)
        << m;
    EXPECT_NE(m.find("; lower --ctx-size"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(require_available_memory(1 << 20, "a megabyte", "never said"));
}

}  // namespace
}  // namespace sy
