// scripts/bundle-binary: the bundled binary runs on its own libraries and loader, and prints
// exactly what the binary it was made from prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_cli.h"
#include "support/temp_file.h"

namespace sy {
namespace {

const std::string kScript = std::string(SY_SOURCE_DIR) + "/scripts/bundle-binary";

TEST(BundleBinary, RunsWithTheBundledLibrariesAndGivesTheSameText) {
  test::TempDir dir;
  const std::string bundle = dir.path() + "/b";
  const test::CliRun made = test::run_command(kScript + " " + SY_CLI_PATH + " " + bundle);
  ASSERT_EQ(made.code, 0) << made.out;
  EXPECT_TRUE(std::filesystem::exists(bundle + "/lib/switchyard.bin"));
  EXPECT_TRUE(std::filesystem::exists(bundle + "/lib/libstdc++.so.6")) << "a library the binary loads";

  // The generated text (stdout only: the timings on stderr differ from run to run).
  const std::string args =
      std::string(" generate -m ") + SY_SOURCE_DIR +
      "/models/tiny-mixtral-f16.gguf -p 'A fool and his money' -n 8 --temp 0 -t 2 2>/dev/null; }";
  const test::CliRun direct = test::run_command(std::string("{ ") + SY_CLI_PATH + args);
  // No LD_LIBRARY_PATH: the libraries come from the bundle's own folder.
  const test::CliRun bundled = test::run_command("{ env -u LD_LIBRARY_PATH " + bundle + "/switchyard" + args);
  ASSERT_EQ(direct.code, 0) << direct.out;
  ASSERT_EQ(bundled.code, 0) << bundled.out;
  EXPECT_NE(direct.out.find("A fool and his money"), std::string::npos) << direct.out;
  EXPECT_EQ(bundled.out, direct.out);
}

TEST(BundleBinary, RefusesWhatIsNotAnExecutable) {
  test::TempDir dir;
  const test::CliRun r = test::run_command(kScript + " " + dir.path() + "/missing " + dir.path() + "/b");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("is not an executable; build it first"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/b"));
}

}  // namespace
}  // namespace sy
