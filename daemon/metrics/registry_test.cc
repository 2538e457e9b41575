// Registry, Family, Counter, Gauge: registration, label sets, collectors, and the
// promise that counters never go back.
#include "daemon/metrics/registry.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringsync::metrics {
namespace {

using ::testing::HasSubstr;

const FamilySnapshot* Find(const std::vector<FamilySnapshot>& families, const std::string& name) {
  for (const FamilySnapshot& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(Counter, NeverGoesBack) {
  Counter c;
  c.Increment();
  c.Increment(2.5);
  c.Increment(-10);
  c.Increment(0);
  c.Increment(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.value(), 3.5);
}

TEST(Counter, ConcurrentIncrementsAreExact) {
  Counter c;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 25000; ++i) c.Increment(4096);
      });
    }
  }
  EXPECT_EQ(c.value(), 4.0 * 25000 * 4096);
}

TEST(Gauge, GoesUpAndDown) {
  Gauge g;
  g.Set(5);
  g.Add(-2);
  EXPECT_EQ(g.value(), 3);
}

TEST(Registry, FamiliesKeepRegistrationOrderAndSeriesAreSortedByLabels) {
  Registry registry;
  Family<Counter>& sent = registry.AddCounter("x_bytes_total", "bytes", {"peer"});
  registry.AddGauge("x_ready", "ready").Get().Set(1);
  sent.WithLabels({"3"}).Increment(30);
  sent.WithLabels({"1"}).Increment(10);
  sent.WithLabels({"3"}).Increment(3);
  const std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "x_bytes_total");
  EXPECT_EQ(families[0].type, MetricType::kCounter);
  ASSERT_EQ(families[0].samples.size(), 2u);
  EXPECT_EQ(families[0].samples[0].labels[0], (std::pair<std::string, std::string>("peer", "1")));
  EXPECT_EQ(families[0].samples[0].value, 10);
  EXPECT_EQ(families[0].samples[1].value, 33);
  EXPECT_EQ(families[1].name, "x_ready");
  EXPECT_EQ(families[1].samples[0].value, 1);
}

TEST(Registry, WithLabelsReturnsTheSameMetricForTheSameValues) {
  Registry registry;
  Family<Gauge>& g = registry.AddGauge("x_depth", "depth", {"a", "b"});
  EXPECT_EQ(&g.WithLabels({"1", "2"}), &g.WithLabels({"1", "2"}));
  EXPECT_NE(&g.WithLabels({"1", "2"}), &g.WithLabels({"2", "1"}));
}

TEST(Registry, CollectorsAppendAfterTheFamiliesOnEveryScrape) {
  Registry registry;
  registry.AddCounter("x_total", "x");
  int scrapes = 0;
  registry.AddCollector([&](std::vector<FamilySnapshot>* out) {
    ++scrapes;
    out->push_back(FamilySnapshot{"x_age_seconds", "age", MetricType::kGauge,
                                  {Sample{"", {}, static_cast<double>(scrapes)}}});
  });
  registry.Collect();
  const std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_NE(Find(families, "x_age_seconds"), nullptr);
  EXPECT_EQ(families.back().name, "x_age_seconds");
  EXPECT_EQ(Find(families, "x_age_seconds")->samples[0].value, 2);
}

TEST(Registry, HistogramFamiliesUseTheirBounds) {
  Registry registry;
  Family<Histogram>& h = registry.AddHistogram("x_seconds", "t", {"kind"}, {0.1, 1});
  h.WithLabels({"a"}).Observe(0.5);
  const std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_EQ(families[0].samples.size(), 5u);  // 2 bounds + Inf, sum, count
  EXPECT_EQ(families[0].samples[1].value, 1);  // le=1
}

TEST(Registry, TextExpositionWritesEveryFamily) {
  Registry registry;
  registry.AddCounter("x_total", "Things.").Get().Increment(2);
  EXPECT_EQ(registry.TextExposition(), "# HELP x_total Things.\n# TYPE x_total counter\nx_total 2\n");
}

TEST(RegistryDeathTest, DuplicateAndInvalidNamesAbortNamingThem) {
  EXPECT_DEATH(
      {
        Registry registry;
        registry.AddCounter("x_total", "x");
        registry.AddGauge("x_total", "x");
      },
      "x_total.*registered twice");
  EXPECT_DEATH(
      {
        Registry registry;
        registry.AddCounter("x-total", "x");
      },
      "x-total");
  EXPECT_DEATH(
      {
        Registry registry;
        registry.AddCounter("x_total", "x", {"__reserved"});
      },
      "__reserved");
}

TEST(Names, FollowPrometheusRules) {
  EXPECT_TRUE(ValidateMetricName("ringsync_ring_bytes_sent_total").ok());
  EXPECT_TRUE(ValidateMetricName("a:b_c").ok());
  EXPECT_FALSE(ValidateMetricName("").ok());
  EXPECT_FALSE(ValidateMetricName("1abc").ok());
  EXPECT_TRUE(ValidateLabelName("peer_rank").ok());
  EXPECT_FALSE(ValidateLabelName("a:b").ok());
  EXPECT_FALSE(ValidateLabelName("le").ok());
  EXPECT_THAT(ValidateLabelName("__name__").message(), HasSubstr("reserves"));
}

}  // namespace
}  // namespace ringsync::metrics
