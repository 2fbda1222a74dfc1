// Strict UTF-8 checks for strings that go into JSON and SVG.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace sy {
namespace {

TEST(Utf8, AcceptsWellFormedTextOnly) {
  for (const char* good :
       {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(is_valid_utf8(good)) << good;
  }
  // A stray continuation byte, a cut sequence, overlong forms, a surrogate, beyond U+10FFFF.
  for (const char* bad : {"\x80", "caf\xC3", "\xE2\x82", "\xC0\xAF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF",
                          "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF"}) {
    EXPECT_FALSE(is_valid_utf8(bad)) << testing::PrintToString(std::string(bad));
  }
}

TEST(Utf8, ReplacesBadBytesAndCutsBetweenCharacters) {
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(valid_utf8("caf\xC3"), "caf\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  // "é" takes bytes 3-4: a 4-byte cut ends before it rather than inside it.
  EXPECT_EQ(valid_utf8("caf\xC3\xA9", 4), "caf");
  EXPECT_EQ(valid_utf8("caf\xC3\xA9", 5), "caf\xC3\xA9");
  EXPECT_EQ(valid_utf8("\xFF\xFF", 4), "\xEF\xBF\xBD");
  EXPECT_TRUE(is_valid_utf8(valid_utf8("\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80 ok")));
}

}  // namespace
}  // namespace sy
