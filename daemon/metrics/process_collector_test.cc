// process_* metrics: parsing /proc and what this very process reports.
#include "daemon/metrics/process_collector.h"

#include <ctime>

#include "gtest/gtest.h"

namespace ringsync::metrics {
namespace {

const FamilySnapshot* Find(const std::vector<FamilySnapshot>& families, const std::string& name) {
  for (const FamilySnapshot& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(ParseProcStat, ReadsTheFieldsAfterACommandNameWithSpacesAndParentheses) {
  const std::string line =
      "1234 (ring sync) (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 "
      "98765 123456789 4321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  std::optional<ProcStat> stat = ParseProcStat(line);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->utime_ticks, 250u);
  EXPECT_EQ(stat->stime_ticks, 50u);
  EXPECT_EQ(stat->start_ticks, 98765u);
  EXPECT_EQ(stat->virtual_bytes, 123456789u);
  EXPECT_EQ(stat->resident_pages, 4321u);
}

TEST(ParseProcStat, RefusesTruncatedLines) {
  EXPECT_FALSE(ParseProcStat("1234 (x) S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcStat("garbage").has_value());
}

TEST(ParseBootTime, FindsTheBtimeLine) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"), 1700000000u);
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\n").has_value());
}

TEST(ProcessCollector, ReportsThisProcess) {
  Registry registry;
  AddProcessCollector(registry);
  const std::vector<FamilySnapshot> families = registry.Collect();
  const FamilySnapshot* rss = Find(families, "process_resident_memory_bytes");
  ASSERT_NE(rss, nullptr);
  EXPECT_GT(rss->samples[0].value, 1 << 20);
  const FamilySnapshot* start = Find(families, "process_start_time_seconds");
  ASSERT_NE(start, nullptr);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(start->samples[0].value, now + 1);
  EXPECT_GT(start->samples[0].value, now - 3600);
  const FamilySnapshot* cpu = Find(families, "process_cpu_seconds_total");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->type, MetricType::kCounter);
  EXPECT_GE(cpu->samples[0].value, 0);
  ASSERT_NE(Find(families, "process_open_fds"), nullptr);
  EXPECT_GE(Find(families, "process_open_fds")->samples[0].value, 3);
}

}  // namespace
}  // namespace ringsync::metrics
