// Specification of the UTF-8 checks: what proto3 string fields accept, and a prefix that
// never cuts a character.
#include "core/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(IsValidUtf8, AcceptsAsciiAndWellFormedSequencesOfEveryLength) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("grad/fc1"));
  EXPECT_TRUE(IsValidUtf8("gr\xC3\xA4" "d"));                // U+00E4, two bytes
  EXPECT_TRUE(IsValidUtf8("\xE6\xA8\xA9\xE9\x87\x8D"));       // two CJK characters, three each
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));               // U+1F600, four bytes
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));               // U+10FFFF, the last
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));           // NUL is a character
}

TEST(IsValidUtf8, RefusesStrayTruncatedOverlongSurrogateAndOutOfRangeBytes) {
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                 // a continuation byte alone
  EXPECT_FALSE(IsValidUtf8("gr\xC3"));               // cut short
  EXPECT_FALSE(IsValidUtf8("\xE6\xA8"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));             // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));         // U+D800, a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));     // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));             // a lead byte without its continuation
}

TEST(Utf8Prefix, CutsBetweenCharactersNeverInsideOne) {
  const std::string cjk = "\xE6\xA8\xA9\xE9\x87\x8D";  // 3 + 3 bytes
  EXPECT_EQ(Utf8Prefix(cjk, 6), cjk);
  EXPECT_EQ(Utf8Prefix(cjk, 5), "\xE6\xA8\xA9");
  EXPECT_EQ(Utf8Prefix(cjk, 3), "\xE6\xA8\xA9");
  EXPECT_EQ(Utf8Prefix(cjk, 2), "");
  EXPECT_EQ(Utf8Prefix("abcdef", 4), "abcd");
  for (size_t cut = 0; cut <= cjk.size(); ++cut) {
    EXPECT_TRUE(IsValidUtf8(Utf8Prefix(cjk, cut))) << cut;
  }
}

}  // namespace
}  // namespace ringsync
