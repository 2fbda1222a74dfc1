// Every saved fuzzer input, through its target: seeds (small valid inputs, so that the
// fuzzer starts from the formats' structure) and anything a fuzzer run found. Runs under
// the sanitizers with `make test-sanitize`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/fuzz_targets.h"

namespace sy::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryTargetHasSeedsAndHandlesThem) {
  for (const Target& t : targets()) {
    const fs::path dir = fs::path(SY_SOURCE_DIR) / "tests/fuzz/corpus" / t.name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    int n = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      SCOPED_TRACE(entry.path().string());
      EXPECT_NO_THROW(t.run(bytes.data(), bytes.size()));
      ++n;
    }
    EXPECT_GT(n, 0) << t.name << ": no seeds";
  }
}

// `make fuzz` runs one target per seed folder.
TEST(FuzzCorpus, EverySeedFolderNamesATarget) {
  for (const auto& entry : fs::directory_iterator(fs::path(SY_SOURCE_DIR) / "tests/fuzz/corpus")) {
    EXPECT_NO_THROW(target(entry.path().filename().string())) << entry.path();
  }
}

TEST(FuzzCorpus, UnknownTargetNamesAreRefused) {
  EXPECT_THROW(target("no-such-parser"), std::invalid_argument);
  EXPECT_EQ(target("gguf"), targets().front().run);
}

}  // namespace
}  // namespace sy::fuzz
