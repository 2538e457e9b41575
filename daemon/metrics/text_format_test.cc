// Text exposition format 0.0.4: lines, escaping, number formatting.
#include "daemon/metrics/text_format.h"

#include <limits>

#include "gtest/gtest.h"

namespace ringsync::metrics {
namespace {

TEST(FormatValue, IntegersPlainOthersShortestSpecialsByName) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(1e15), "1000000000000000");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(0.00001), "1e-05");
  EXPECT_EQ(FormatValue(175664234.070662), "175664234.070662");
  EXPECT_EQ(FormatValue(1.5e300), "1.5e+300");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(Escaping, LabelValuesEscapeBackslashQuoteNewlineHelpNoQuote) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");
}

TEST(WriteTextFormat, HelpTypeAndOneLinePerSample) {
  std::vector<FamilySnapshot> families = {
      {"x_total", "Things done.", MetricType::kCounter,
       {Sample{"", {{"kind", "all\"reduce"}, {"result", "ok"}}, 3}}},
      {"x_seconds", "Time.", MetricType::kHistogram,
       {Sample{"_bucket", {{"le", "+Inf"}}, 1}, Sample{"_sum", {}, 0.5},
        Sample{"_count", {}, 1}}},
      {"x_empty", "Not used yet.", MetricType::kGauge, {}},
  };
  EXPECT_EQ(WriteTextFormat(families),
            "# HELP x_total Things done.\n"
            "# TYPE x_total counter\n"
            "x_total{kind=\"all\\\"reduce\",result=\"ok\"} 3\n"
            "# HELP x_seconds Time.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"+Inf\"} 1\n"
            "x_seconds_sum 0.5\n"
            "x_seconds_count 1\n"
            "# HELP x_empty Not used yet.\n"
            "# TYPE x_empty gauge\n");
}

}  // namespace
}  // namespace ringsync::metrics
