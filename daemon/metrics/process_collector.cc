#include "daemon/metrics/process_collector.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/metrics/scrape_family.h"

namespace ringsync::metrics {
namespace {

std::string ReadWholeFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t CountOpenFds() {
  std::error_code error;
  size_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++count;
  }
  return count > 0 ? count - 1 : 0;  // the iterator's own descriptor
}

}  // namespace

std::optional<ProcStat> ParseProcStat(absl::string_view line) {
  const size_t close = line.rfind(')');
  if (close == absl::string_view::npos) return std::nullopt;
  // Fields from 3 (state) on, space-separated.
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(line.substr(close + 1)), ' ', absl::SkipEmpty());
  // Field N is fields[N - 3].
  auto field = [&](int n, uint64_t* out) {
    const size_t i = static_cast<size_t>(n - 3);
    return i < fields.size() && absl::SimpleAtoi(fields[i], out);
  };
  ProcStat stat;
  if (!field(14, &stat.utime_ticks) || !field(15, &stat.stime_ticks) ||
      !field(22, &stat.start_ticks) || !field(23, &stat.virtual_bytes) ||
      !field(24, &stat.resident_pages)) {
    return std::nullopt;
  }
  return stat;
}

std::optional<uint64_t> ParseBootTime(absl::string_view proc_stat_file) {
  for (absl::string_view line : absl::StrSplit(proc_stat_file, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      uint64_t seconds = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &seconds)) return seconds;
    }
  }
  return std::nullopt;
}

ProcessCollector::ProcessCollector()
    : ticks_per_second_(static_cast<double>(::sysconf(_SC_CLK_TCK))),
      page_bytes_(static_cast<double>(::sysconf(_SC_PAGESIZE))),
      boot_seconds_(ParseBootTime(ReadWholeFile("/proc/stat"))) {}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const std::optional<ProcStat> stat = ParseProcStat(ReadWholeFile("/proc/self/stat"));
  if (stat.has_value()) {
    out.push_back(SingleSample(
        "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        MetricType::Counter,
        static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks_per_second_));
    out.push_back(SingleSample("process_resident_memory_bytes", "Resident memory size in bytes.",
                               MetricType::Gauge,
                               static_cast<double>(stat->resident_pages) * page_bytes_));
    out.push_back(SingleSample("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                               MetricType::Gauge, static_cast<double>(stat->virtual_bytes)));
    if (boot_seconds_.has_value()) {
      out.push_back(SingleSample("process_start_time_seconds",
                                 "Start time of the process since unix epoch in seconds.",
                                 MetricType::Gauge,
                                 static_cast<double>(*boot_seconds_) +
                                     static_cast<double>(stat->start_ticks) / ticks_per_second_));
    }
  }
  out.push_back(SingleSample("process_open_fds", "Number of open file descriptors.",
                             MetricType::Gauge, static_cast<double>(CountOpenFds())));
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    out.push_back(SingleSample("process_max_fds", "Maximum number of open file descriptors.",
                               MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

}  // namespace ringsync::metrics
