#include "daemon/metrics/refusals.h"

#include "absl/time/time.h"
#include "daemon/metrics/text_page.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace ringsync::metrics {
namespace {

using ::testing::HasSubstr;

TEST(Refusals, CountsEveryRefusalButLogsOneLinePerReasonPerInterval) {
  prometheus::Registry registry;
  absl::Time now = absl::UnixEpoch();
  Refusals refusals(registry, absl::Seconds(1), [&] { return now; });

  EXPECT_TRUE(refusals.Refuse("message_too_large", "first"));
  EXPECT_FALSE(refusals.Refuse("message_too_large", "second, within the interval"));
  EXPECT_TRUE(refusals.Refuse("bad_token", "another reason has its own interval"));
  now += absl::Seconds(1);
  EXPECT_TRUE(refusals.Refuse("message_too_large", "after the interval"));

  EXPECT_EQ(refusals.Count("message_too_large"), 3u);
  EXPECT_EQ(refusals.Count("bad_token"), 1u);
  EXPECT_EQ(refusals.Count("never"), 0u);
}

TEST(Refusals, AppearOnTheMetricsPageByReason) {
  prometheus::Registry registry;
  Refusals refusals(registry);
  refusals.Refuse("bad_token", "x");
  refusals.Refuse("bad_token", "y");

  const std::string page = TextPage({&registry});
  EXPECT_THAT(page, HasSubstr("ringsync_refused_total{reason=\"bad_token\"} 2"));
}

}  // namespace
}  // namespace ringsync::metrics
