// What `ringsyncctl status` prints for a ClusterStatus (Coordinator.GetClusterStatus):
// a table for people, or one JSON object for scripts (--json).
#pragma once

#include <string>

#include "ringsync/v1/coordinator.pb.h"

namespace ringsync {

// A summary line per ring view, then one row per live worker in rank order:
//
//   coordinator 127.0.0.1:7400: ring formed, generation 1, 4 of 4 workers joined (4 joins, 1 view published)
//   ring settings: --segment_bytes=1048576 --algorithm=auto ...
//   RANK  WORKER  ADDRESS          HTTP             READY  HEARTBEAT  GEN  DONE  FAILED  LAST ERROR
//   0     w0      127.0.0.1:41001  127.0.0.1:42001  yes    0.2s       1    12    0       -
//
// Long errors are cut to fit a terminal (--json has them whole).
std::string FormatClusterTable(const std::string& coordinator, const v1::ClusterStatus& status);

// The same as one JSON object; numbers as JSON numbers, ages in seconds.
std::string FormatClusterJson(const std::string& coordinator, const v1::ClusterStatus& status);

}  // namespace ringsync
