// The standard process_* metrics every Prometheus client exports, read from /proc at
// scrape time: CPU seconds, resident and virtual memory, start time, open and maximum
// file descriptors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/metrics/registry.h"

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

// Adds process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_start_time_seconds, process_open_fds and
// process_max_fds. A value that cannot be read is left out of that scrape.
void AddProcessCollector(Registry& registry);

}  // namespace ringsync::metrics
