// Whole files are read and written (prompts, templates, traces; logits, reports, plots),
// output is complete or removed, and a failure names the file and says why in the
// system's words.
#include "base/whole_file.h"

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

TEST(WholeFile, WritesAndReadsTheWholeText) {
  test::TempFile f(".txt");
  const std::string text("line one\nline two\n\0binary tail", 30);
  write_whole_file(f.path(), text);
  EXPECT_EQ(test::read_text_file(f.path()), text);
  EXPECT_EQ(read_whole_file(f.path(), "test"), text);
  write_whole_file(f.path(), std::string("shorter"));  // replaces, does not append
  EXPECT_EQ(read_whole_file(f.path(), "test"), "shorter");
  try {
    read_whole_file("/nonexistent-folder/prompt.txt", "perplexity");
    FAIL() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "perplexity: cannot read /nonexistent-folder/prompt.txt: No such file or directory");
  }
  try {
    read_whole_file("/", "--chat-template-file");
    FAIL() << "a folder was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--chat-template-file: cannot read /: Is a directory");
  }
}

TEST(WholeFile, SaysWhyItCouldNotWrite) {
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
