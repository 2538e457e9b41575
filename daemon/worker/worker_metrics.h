// WorkerMetrics: what a worker exports on /metrics (names, labels and meaning are listed
// in the README's "Metrics" section). The executor reports each finished collective
// (a few atomic adds and one short map lookup per label set — never per segment); the
// ring's state (generation, rank, readiness, inbox depth) is read at scrape time.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "core/collective.h"
#include "core/ring/ring_member.h"
#include "daemon/metrics/registry.h"
#include "daemon/worker/failure_cause.h"
#include "daemon/worker/ring_manager.h"

namespace ringsync {

// One collective as the executor finished it.
struct FinishedCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DType dtype = DType::kFloat32;
  uint64_t bytes = 0;                // this rank's buffer: count x element size
  const RingEpoch* epoch = nullptr;  // the generation it ran on; null when there was none
  RingStats stats;                   // what moved on the ring, also when it failed
  absl::Duration elapsed;
  absl::Status status;
  FailureCause cause = FailureCause::kOther;  // meaningful when !status.ok()
};

// The size classes of ringsync_busbw_bytes_per_second: "<64KiB", "<1MiB", "<16MiB",
// "<256MiB", ">=256MiB".
absl::string_view SizeClass(uint64_t bytes);

// nccl-tests' bus bandwidth of an all-reduce of `bytes` over `world_size` ranks that
// took `elapsed`: bytes / elapsed x 2(N-1)/N. 0 when elapsed is not positive.
double AllReduceBusBandwidth(uint64_t bytes, int world_size, absl::Duration elapsed);

class WorkerMetrics {
 public:
  // Registers the worker's families and a collector reading `ring` at scrape time.
  WorkerMetrics(metrics::Registry& registry, RingManager& ring, absl::string_view reduce_device);

  void OnCollectiveFinished(const FinishedCollective& collective);

 private:
  metrics::Family<metrics::Counter>& collectives_;
  metrics::Family<metrics::Counter>& failed_;
  metrics::Family<metrics::Counter>& bytes_sent_;
  metrics::Family<metrics::Counter>& bytes_received_;
  metrics::Family<metrics::Histogram>& duration_;
  metrics::Family<metrics::Gauge>& busbw_;
  metrics::Counter& reduce_seconds_;
  metrics::Counter& overflows_;
};

}  // namespace ringsync
