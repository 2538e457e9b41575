#include "daemon/logging/sanitized_text.h"

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(SanitizeText, KeepsShortTextAndFlattensControlCharacters) {
  EXPECT_EQ(SanitizeText("all good"), "all good");
  EXPECT_EQ(SanitizeText("line1\nline2\r\t!"), "line1 line2  !");
}

TEST(SanitizeText, CutsLongTextAtACharacterBoundaryAndMarksIt) {
  EXPECT_EQ(SanitizeText("abcdef", 4), "abcd...");
  // "é" is two bytes (C3 A9): a cut after byte 3 must not split it.
  EXPECT_EQ(SanitizeText("ab\xC3\xA9zz", 3), "ab...");
  EXPECT_EQ(SanitizeText("ab\xC3\xA9zz", 4), "ab\xC3\xA9...");
}

}  // namespace
}  // namespace ringsync
