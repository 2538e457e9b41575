// The page this registry writes passes Prometheus' own linter, `promtool check metrics`
// (Debian package prometheus): every metric type, labels that need escaping, the
// process collector, and a family that has no series yet.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "daemon/metrics/build_info.h"
#include "daemon/metrics/process_collector.h"
#include "daemon/metrics/registry.h"
#include "gtest/gtest.h"

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

TEST(Promtool, AcceptsEveryKindOfFamilyThisRegistryWrites) {
  Registry registry;
  registry.AddCounter("ringsync_test_events_total", "Events \\ with \"quotes\"\nand lines.",
                      {"kind", "result"})
      .WithLabels({"all\"reduce\n", "o\\k"})
      .Increment(3);
  registry.AddGauge("ringsync_test_depth", "Depth.", {"peer_rank"}).WithLabels({"1"}).Set(-2.5);
  registry.AddHistogram("ringsync_test_duration_seconds", "Duration.", {"kind"}, {0.001, 0.1, 1})
      .WithLabels({"allreduce"})
      .Observe(0.05);
  registry.AddCounter("ringsync_test_unused_total", "Not used yet.", {"cause"});
  AddProcessCollector(registry);
  AddBuildInfo(registry);
  const std::string page = registry.TextExposition();
  std::string output;
  EXPECT_EQ(PromtoolCheck(page, &output), 0) << output << "\npage:\n" << page;
  EXPECT_EQ(output, "") << "promtool lint findings for:\n" << page;
}

}  // namespace
}  // namespace ringsync::metrics
