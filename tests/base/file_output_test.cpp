// Output files (logits, reports, plots) are written whole or not at all, and a failure
// says why in the system's words.
#include "base/file_output.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "base/error.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

std::string error_of(const std::string& path, const std::string& text) {
  try {
    write_whole_file(path, text);
  } catch (const Error& e) {
    return e.what();
  }
  return "written";
}

TEST(FileOutput, WritesTheWholeText) {
  test::TempFile f(".txt");
  write_whole_file(f.path(), std::string("line one\nline two\n"));
  EXPECT_EQ(test::read_text_file(f.path()), "line one\nline two\n");
  write_whole_file(f.path(), std::string("shorter"));  // replaces, does not append
  EXPECT_EQ(test::read_text_file(f.path()), "shorter");
}

TEST(FileOutput, SaysWhyItCouldNotWrite) {
  EXPECT_EQ(error_of("/nonexistent-folder/x.f32", "x"),
            "cannot write /nonexistent-folder/x.f32: No such file or directory");
  struct stat st;
  if (::stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full here";
  // A device that is always full: the reason comes from the write or the close, and the
  // device itself is not removed.
  EXPECT_EQ(error_of("/dev/full", std::string(1 << 16, 'x')),
            "cannot write /dev/full: No space left on device");
  EXPECT_EQ(::stat("/dev/full", &st), 0);
}

}  // namespace
}  // namespace sy
