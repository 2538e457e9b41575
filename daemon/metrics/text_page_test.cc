// TextPage: the families of every collectable, in their order, as prometheus-cpp's text
// format; SingleSample and Sample put the value where the family's type makes it read;
// build info is one series with the version.
#include "daemon/metrics/text_page.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/metrics/build_info.h"
#include "daemon/metrics/scrape_family.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ringsync::metrics {
namespace {

using ::testing::HasSubstr;
using prometheus::MetricType;

// What a scrape-time collector returns: fixed families, to read the page against.
class FixedCollector final : public prometheus::Collectable {
 public:
  explicit FixedCollector(std::vector<prometheus::MetricFamily> families)
      : families_(std::move(families)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return families_; }

 private:
  std::vector<prometheus::MetricFamily> families_;
};

TEST(TextPage, WritesTheRegistryThenEachCollectorInOrder) {
  prometheus::Registry registry;
  prometheus::BuildCounter().Name("x_total").Help("Things.").Register(registry).Add({}).Increment(2);
  const FixedCollector first({SingleSample("x_ready", "Ready.", MetricType::Gauge, 1)});
  const FixedCollector second({SingleSample("x_joins_total", "Joins.", MetricType::Counter, 4)});
  EXPECT_EQ(TextPage({&registry, &first, &second}),
            "# HELP x_total Things.\n"
            "# TYPE x_total counter\n"
            "x_total 2\n"
            "# HELP x_ready Ready.\n"
            "# TYPE x_ready gauge\n"
            "x_ready 1\n"
            "# HELP x_joins_total Joins.\n"
            "# TYPE x_joins_total counter\n"
            "x_joins_total 4\n");
}

TEST(TextPage, ACollectorsEmptyFamilyKeepsItsHelpAndTypeARegistrysDoesNot) {
  prometheus::Registry registry;
  prometheus::BuildCounter().Name("x_failed_total").Help("Failures.").Register(registry);
  const FixedCollector ages(
      {prometheus::MetricFamily{"x_age_seconds", "Ages.", MetricType::Gauge, {}}});
  EXPECT_EQ(TextPage({&registry, &ages}),
            "# HELP x_age_seconds Ages.\n"
            "# TYPE x_age_seconds gauge\n");
}

TEST(TextPage, LabelValuesAreEscaped) {
  prometheus::MetricFamily ages{"x_age_seconds", "Ages.", MetricType::Gauge, {}};
  ages.metric.push_back(Sample(MetricType::Gauge, 0.869, {{"worker_id", "w\"0"}}));
  ages.metric.push_back(Sample(MetricType::Gauge, 3145728, {{"worker_id", "w1"}}));
  const FixedCollector collector({ages});
  const std::string page = TextPage({&collector});
  EXPECT_THAT(page, HasSubstr("x_age_seconds{worker_id=\"w\\\"0\"} 0.869\n"));
  EXPECT_THAT(page, HasSubstr("x_age_seconds{worker_id=\"w1\"} 3145728\n"));
}

TEST(BuildInfo, IsOneSeriesNamingTheVersion) {
  prometheus::Registry registry;
  AddBuildInfo(registry);
  EXPECT_THAT(TextPage({&registry}),
              HasSubstr(absl::StrCat("ringsync_build_info{version=\"", RingsyncVersion(),
                                     "\"} 1\n")));
  EXPECT_NE(RingsyncVersion(), "unknown");
}

}  // namespace
}  // namespace ringsync::metrics
