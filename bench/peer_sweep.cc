#include "bench/peer_sweep.h"

#include <sys/resource.h>

#include "absl/flags/flag.h"
#include "bench/bench_table.h"

ABSL_FLAG(std::string, collective, "allreduce",
          "allreduce, broadcast (from rank 0), allgather (a size is the whole result), scatter "
          "(from rank 0; a size is the root's input), gather (to rank 0; a size is the "
          "root's result), alltoall, alltoallv (uneven blocks) or reducescatter (a size is "
          "each rank's input)");
ABSL_FLAG(std::string, min_bytes, "1M", "smallest collective, e.g. 4, 64K, 1M");
ABSL_FLAG(std::string, max_bytes, "256M", "largest collective");
ABSL_FLAG(int64_t, step_factor, 2, "size multiplier between rows (>= 2)");
ABSL_FLAG(int64_t, iters, 20, "timed collectives per size (fewer for large sizes, as ringsync-bench)");
ABSL_FLAG(int64_t, warmup_iters, 5, "untimed collectives per size first");
ABSL_FLAG(std::string, dtype, "float32", "float32, float64, int32 or int64");
ABSL_FLAG(std::string, op, "sum", "sum, min or max");
ABSL_FLAG(int, check, 1, "1: check one collective of known inputs per size");

namespace ringsync::bench {

std::optional<PeerSweep> ReadPeerSweep(const char* program) {
  PeerSweep s{ParseSize(absl::GetFlag(FLAGS_min_bytes)), ParseSize(absl::GetFlag(FLAGS_max_bytes)),
              absl::GetFlag(FLAGS_step_factor),          absl::GetFlag(FLAGS_iters),
              absl::GetFlag(FLAGS_warmup_iters),         absl::GetFlag(FLAGS_dtype),
              absl::GetFlag(FLAGS_op),                   absl::GetFlag(FLAGS_check) != 0,
              absl::GetFlag(FLAGS_collective)};
  const bool dtype_ok = s.dtype == "float32" || s.dtype == "float64" || s.dtype == "int32" ||
                        s.dtype == "int64";
  const bool op_ok = s.op == "sum" || s.op == "min" || s.op == "max";
  const bool collective_ok =
      s.collective == "allreduce" || s.collective == "broadcast" || s.collective == "allgather" ||
      s.collective == "scatter" || s.collective == "gather" || s.collective == "alltoall" ||
      s.collective == "reducescatter" || s.collective == "alltoallv";
  if (s.min_bytes > 0 && s.max_bytes >= s.min_bytes && s.step_factor >= 2 && s.iters >= 1 &&
      s.warmup_iters >= 0 && dtype_ok && op_ok && collective_ok) {
    return s;
  }
  std::fprintf(stderr, "%s: bad sweep flags (sizes like 1M with min <= max, step_factor >= 2, "
                       "iters >= 1, warmup_iters >= 0, dtype float32|float64|int32|int64, "
                       "op sum|min|max, collective allreduce|broadcast|allgather|scatter|gather|"
                       "alltoall|alltoallv|reducescatter)\n",
               program);
  return std::nullopt;
}

std::vector<size_t> SweepCounts(const PeerSweep& sweep, size_t element_size) {
  std::vector<size_t> counts;
  for (int64_t size = sweep.min_bytes; size <= sweep.max_bytes; size *= sweep.step_factor) {
    const size_t count = std::max<size_t>(1, static_cast<size_t>(size) / element_size);
    if (counts.empty() || counts.back() != count) counts.push_back(count);
    if (size > sweep.max_bytes / sweep.step_factor) break;  // the next size would overflow
  }
  return counts;
}

double PeakRssMiB() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;
}

}  // namespace ringsync::bench
