// process_* metrics: parsing /proc and what this very process reports.
#include "daemon/metrics/process_collector.h"

#include <ctime>

#include "gtest/gtest.h"

namespace ringsync::metrics {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

const MetricFamily* Find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
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
  const std::vector<MetricFamily> families = ProcessCollector().Collect();
  const MetricFamily* rss = Find(families, "process_resident_memory_bytes");
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ(rss->type, MetricType::Gauge);
  EXPECT_GT(rss->metric.at(0).gauge.value, 1 << 20);
  const MetricFamily* start = Find(families, "process_start_time_seconds");
  ASSERT_NE(start, nullptr);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(start->metric.at(0).gauge.value, now + 1);
  EXPECT_GT(start->metric.at(0).gauge.value, now - 3600);
  const MetricFamily* cpu = Find(families, "process_cpu_seconds_total");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->type, MetricType::Counter);
  EXPECT_GE(cpu->metric.at(0).counter.value, 0);
  const MetricFamily* fds = Find(families, "process_open_fds");
  ASSERT_NE(fds, nullptr);
  EXPECT_GE(fds->metric.at(0).gauge.value, 3);
}

}  // namespace
}  // namespace ringsync::metrics
