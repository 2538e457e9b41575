// The pages our daemons serve pass Prometheus' own linter, `promtool check metrics`
// (Debian package prometheus): prometheus-cpp's text serialization of every metric type
// we register, label values that need escaping and a family without series yet, followed
// by what stays ours (the process collector, build info, a collector's labelled family).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/metrics/build_info.h"
#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/scrape_family.h"
#include "daemon/metrics/text_page.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ringsync::metrics {
namespace {

// Runs promtool on `page`; returns its exit code and puts its output in `output`.
int PromtoolCheck(const std::string& page, std::string* output) {
  char path[] = "/tmp/ringsync-promtool-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  FILE* file = ::fdopen(fd, "w");
  std::fwrite(page.data(), 1, page.size(), file);
  std::fclose(file);
  const std::string command =
      std::string(PROMTOOL_PATH) + " check metrics < " + path + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = ::pclose(pipe);
  ::unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A collector's family with labels, as the coordinator's heartbeat ages are built.
class AgesCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily ages{"ringsync_test_age_seconds", "Age.",
                                  prometheus::MetricType::Gauge, {}};
    ages.metric.push_back(Sample(prometheus::MetricType::Gauge, 0.25, {{"worker_id", "w\"0"}}));
    return {ages};
  }
};

TEST(Promtool, AcceptsEveryKindOfFamilyOurDaemonsServe) {
  prometheus::Registry registry;
  prometheus::BuildCounter()
      .Name("ringsync_test_events_total")
      .Help("Events with \"quotes\" and (cuda:N) +-Inf.")
      .Register(registry)
      .Add({{"kind", "all\"reduce\n"}, {"result", "o\\k"}})
      .Increment(3);
  prometheus::BuildGauge()
      .Name("ringsync_test_depth")
      .Help("Depth.")
      .Register(registry)
      .Add({{"size_class", "<64KiB"}})
      .Set(-2.5);
  prometheus::BuildHistogram()
      .Name("ringsync_test_duration_seconds")
      .Help("Duration.")
      .Register(registry)
      .Add({{"kind", "allreduce"}}, prometheus::Histogram::BucketBoundaries{0.0001, 0.1, 1})
      .Observe(0.05);
  prometheus::BuildCounter()
      .Name("ringsync_test_unused_total")
      .Help("Not used yet.")
      .Register(registry);
  AddBuildInfo(registry);
  const ProcessCollector process;
  const AgesCollector ages;
  const std::string page = TextPage({&registry, &process, &ages});
  std::string output;
  EXPECT_EQ(PromtoolCheck(page, &output), 0) << output << "\npage:\n" << page;
  EXPECT_EQ(output, "") << "promtool lint findings for:\n" << page;
}

}  // namespace
}  // namespace ringsync::metrics
