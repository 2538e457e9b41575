// The standard process_* metrics every Prometheus client exports, read from /proc at
// scrape time: CPU seconds, resident and virtual memory, start time, open and maximum
// file descriptors. prometheus-cpp's core has no process collector (the Go and Python
// clients do), so this one is ours, written as a prometheus::Collectable.
//
// Thread-safety: Collect() may run on several threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringsync::metrics {

// The fields of /proc/PID/stat this collector uses, in clock ticks and bytes.
struct ProcStat {
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_ticks = 0;  // since boot
  uint64_t virtual_bytes = 0;
  uint64_t resident_pages = 0;
};

// Parses the one line of /proc/PID/stat; nullopt when it is malformed. The command name
// (field 2, in parentheses) may hold spaces and parentheses itself.
std::optional<ProcStat> ParseProcStat(absl::string_view line);

// The boot time ("btime N" in /proc/stat) in seconds since the epoch.
std::optional<uint64_t> ParseBootTime(absl::string_view proc_stat_file);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds and process_max_fds of this process. A
// value that cannot be read is left out of that scrape.
class ProcessCollector final : public prometheus::Collectable {
 public:
  ProcessCollector();

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // Constant for the life of the process: read once.
  const double ticks_per_second_;
  const double page_bytes_;
  const std::optional<uint64_t> boot_seconds_;
};

}  // namespace ringsync::metrics
