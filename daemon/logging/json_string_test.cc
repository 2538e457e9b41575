// JSON string literals: what is escaped (RFC 8259) and what passes through.
#include "daemon/logging/json_string.h"

#include <string>

#include "gtest/gtest.h"

namespace ringsync {
namespace {

TEST(JsonString, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString("a\"b\\c\nd\re\tf\x1f"), "\"a\\\"b\\\\c\\nd\\re\\tf\\u001f\"");
  EXPECT_EQ(JsonString("\xc3\xa9"), "\"\xc3\xa9\"");  // UTF-8 passes through
}

TEST(AppendJsonString, AppendsTheLiteralToWhatIsThere) {
  std::string out = "{\"msg\":";
  AppendJsonString("a\tb", &out);
  EXPECT_EQ(out, "{\"msg\":\"a\\tb\"");
}

}  // namespace
}  // namespace ringsync
